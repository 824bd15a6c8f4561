"""Write the learner-facing GPU page, ``docs/gpu-h200.md``, from the stored H200 run.

    PYTHONPATH=tools python -m gpucheck.page           # write the page
    PYTHONPATH=tools python -m gpucheck.page --check   # exit 1 if the committed page is stale

Every figure on the page comes from ``d2lhelpers/runs/h200-2026-11-30.json`` (the run, its notes,
the figures marked as artefacts with their reasons, the follow-up probes); the data-sheet row comes
from ``d2lhelpers.datasheets``. The only other text is the fixed explanation below. Values are
formatted by their key name: ``*_s`` seconds, ``gflops`` GFLOP/s, ``gbs`` GB/s, ``speedup`` /
``ratio`` / ``slowdown`` a factor.
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from pathlib import Path
from typing import Any

from d2lhelpers.datasheets import find_spec

ROOT = Path(__file__).resolve().parents[2]
RUN_ID = 'h200-2026-11-30'
RUN = ROOT / 'd2lhelpers' / 'runs' / f'{RUN_ID}.json'
PAGE = ROOT / 'docs' / 'gpu-h200.md'
PLOTS = 'gpu-h200'  # beside the page: docs/gpu-h200/plot-<folder>__<notebook>.png

TITLES = {
    'notebooks/use-gpu': 'use-gpu: mục GPU của D2L',
    'exercises/01-cpu-vs-gpu-matmul': 'Bài 1 (cpu-vs-gpu-matmul): nhân ma trận trên CPU và GPU',
    'exercises/02-parameters-on-gpu': 'Bài 2 (parameters-on-gpu): tham số trên GPU',
    'exercises/03-log-on-device': 'Bài 3 (log-on-device): ghi log trên thiết bị',
    'exercises/04-two-gpu-matmul': 'Bài 4 (two-gpu-matmul): hai phép nhân trên hai thiết bị',
    'notebooks/choose-a-gpu': 'choose-a-gpu: băng thông, GFLOP/s, roofline, 16 bit',
    'notebooks/data-parallel': 'data-parallel: song song dữ liệu và song song mô hình',
}

INTRO = """\
Các notebook của bộ sổ tay được lưu kèm kết quả chạy trên một máy không có GPU. Trang này dành
cho bạn đọc chưa có GPU: nó cho xem số đo thật của một lần chạy cả bộ sổ tay trên một GPU, bằng
trình chạy notebook (`nbrun`) của chính bộ sổ tay, đặt cạnh số đo CPU của cùng máy.

**Số liệu lấy từ đâu.** Mọi số trên trang lấy từ lần chạy lưu dưới dạng dữ liệu trong gói:
[`d2lhelpers/runs/{id}.json`](../d2lhelpers/runs/{id}.json). Trong một notebook,
`d2lhelpers.reference` đọc cùng tệp ấy (cả trên Colab). Khóa của một số (ví dụ
`median_s.device_once`) là đường dẫn của nó trong kết quả notebook đã lưu. *Phép đo thêm* là các
phép đo TensorFlow thuần làm trong cùng phiên, trên cùng loại máy, để trả lời điều mà notebook
đo sai. Số liệu từ data sheet là số nhà sản xuất công bố, không phải số đo."""

OLD = """\
> **Đọc trước khi dùng số.** Lần chạy này dùng một phiên bản cũ của các notebook ({version},
> commit `{commit}`; các notebook hiện nay là {current}). Mỗi mục dưới đây tách hai phần: **(a)
> số đo hợp lệ**, và **(b) số đo hỏng (artefact)**: số mà chính lần chạy cho thấy là sai, kèm
> lý do. Số ở phần (b) chỉ để bạn nhận ra chúng khi gặp lại; đừng trích chúng như hiệu năng
> của GPU."""

WHY = """\
## Vì sao một số đo GPU có thể sai

Ba cơ chế giải thích mọi số ở các phần (b):

1. **Đo chi phí gửi phép toán, không đo GPU.** Ở chế độ eager, gửi một phép toán (dispatch) tốn
   vài chục µs thời gian của host (CPU và bộ nhớ chính của nó). Một phép toán nhỏ trên GPU xong
   nhanh hơn thế: đo từng phép toán một là đo chi phí gửi, thời gian gần như không đổi theo kích
   thước, và GFLOP/s tính từ nó tăng như n³ mà không nói gì về GPU. Các notebook hiện nay đo và
   in mức sàn (floor) và không bao giờ gọi một điểm gần mức sàn là "trần".
2. **TF32 bật ngầm.** Trên GPU thế hệ Ampere trở đi, TensorFlow mặc định tính phép nhân ma trận
   "float32" bằng TF32 trên lõi tensor (tensor core): nhanh hơn FP32 thật nhiều lần nhưng kém
   chính xác hơn. Một số ghi là float32 mà vượt đỉnh FP32 của data sheet là dấu hiệu TF32. Các
   notebook hiện nay tắt TF32 ở mọi kết quả ghi là float32.
3. **Một lần gọi ngắn, đo một lần.** Khi phép toán chỉ vài chục µs, phần host chồng lên GPU
   (Python gửi phép toán kế tiếp trong lúc GPU còn chạy) hiện ra như một lần tăng tốc; hai thiết
   bị logic trên một GPU dùng chung phần cứng của nó, nên một hệ số trên 1x không đến từ GPU."""

MAINTAINERS = """\
## Dành cho người bảo trì

Trang này do `PYTHONPATH=tools python -m gpucheck.page` sinh ra từ tệp của lần chạy: đừng sửa
tay. `tests/tools/test_gpucheck.py` kiểm tra rằng trang đã commit đúng bằng trang sinh ra, và
rằng mọi khóa đánh dấu artefact có trong kết quả. Lưu một lần chạy mới trên máy có GPU:
`make gpu-check` (chạy mọi notebook vào `build/gpu-check/` rồi kiểm tra lần chạy), sau đó
`PYTHONPATH=tools python -m gpucheck.record build/gpu-check --id <gpu>-<ngày> --driver <driver>`
ghi `d2lhelpers/runs/<gpu>-<ngày>.json`; đánh dấu các số đo hỏng trong `artefacts` của notebook, mỗi
khóa một câu lý do."""


# -- formatting by key name ------------------------------------------------------------------


def _size_key(k: str) -> tuple[int, int | str]:
    return (0, int(k)) if k.isdigit() else (1, k)


def fmt(value: Any, path: list[str]) -> str:
    """``value`` at key path ``path``, with the unit its key name gives it."""
    if isinstance(value, dict):
        keys = sorted(value, key=_size_key)
        return ', '.join(f'{k}: {fmt(value[k], [*path, k])}' for k in keys)
    if isinstance(value, list):
        return '[' + ', '.join(fmt(v, path) for v in value) + ']'
    if isinstance(value, bool) or value is None:
        return {True: 'True', False: 'False', None: 'null'}[value]
    if not isinstance(value, (int, float)):
        return str(value)
    for part in reversed(path):
        if part.endswith('_s'):
            if value < 1e-3:
                return f'{value * 1e6:.1f} µs'
            if value < 1:
                return f'{value * 1e3:.3f} ms'
            return f'{value:.3f} s'
        if 'gflops' in part:
            return f'{value:.1f} GFLOP/s'
        if 'gbs' in part:
            return f'{value:.1f} GB/s'
        if 'flop_per_byte' in part:
            return f'{value:.2f} FLOP/byte'
        if any(w in part for w in ('speedup', 'ratio', 'slowdown', 'ideal')):
            return f'{value:.2f}x'
        if 'diff' in part:
            return f'{value:.2e}'
    return str(value) if isinstance(value, int) else f'{value:.6g}'


def _marked(key: str, marks: dict[str, str]) -> bool:
    return any(key == m or key.startswith(m + '.') for m in marks)


def rows(tree: dict[str, Any], marks: dict[str, str], prefix: str = '') -> list[tuple[str, str]]:
    """(dotted key, formatted value) of ``tree``, leaving out the subtrees in ``marks``.

    A dict keyed by sizes (``{'16': ..., '32': ...}``) is one row.
    """
    out = []
    for k, v in tree.items():
        key = f'{prefix}{k}'
        if _marked(key, marks):
            continue
        if isinstance(v, dict) and v and not all(str(x).isdigit() for x in v):
            out += rows(v, marks, key + '.')
        else:
            out.append((key, fmt(v, key.split('.'))))
    return out


def lookup(tree: dict[str, Any], key: str) -> Any:
    """The value at dotted ``key`` (components are dict keys); KeyError when absent."""
    node: Any = tree
    for part in key.split('.'):
        if not isinstance(node, dict) or part not in node:
            raise KeyError(key)
        node = node[part]
    return node


def _cell(text: str) -> str:
    return text.replace('|', '\\|').replace('\n', ' ')


def _table(header: tuple[str, ...], body: list[tuple[str, ...]]) -> list[str]:
    lines = ['| ' + ' | '.join(header) + ' |', '|' + '---|' * len(header)]
    lines += ['| ' + ' | '.join(_cell(c) for c in r) + ' |' for r in body]
    return lines


# -- the page --------------------------------------------------------------------------------


def _machine(run: dict[str, Any]) -> list[str]:
    m, sw = run['machine'], run['software']
    body = [
        (
            'ngày chạy, phiên bản notebook',
            f'{run["date"]}, {run["collection_version"]} (commit `{run["commit"]}`)',
        ),
        (
            'GPU',
            f'{m["gpu_count"]} × {m["gpu"]}, compute capability {m["compute_capability"]}; '
            f'bộ nhớ TensorFlow báo: {m["gpu_memory"]}',
        ),
        (
            'trình điều khiển (driver), thư viện CUDA',
            f'driver {m["driver"]}, {m["cuda_libraries"]}',
        ),
        ('TensorFlow', f'{sw["tensorflow"]} (CUDA {sw["tf_cuda"]}, cuDNN {sw["cudnn"]})'),
        ('Keras, NumPy', f'Keras {sw["keras"]}, NumPy {sw["numpy"]}'),
        ('Python, hệ điều hành', f'Python {m["python"]}, `{m["platform"]}`'),
        ('CPU', f'{m["cpu_cores"]} lõi'),
        ('lệnh', f'`{run["command"]}`'),
    ]
    lines = [f'## Máy đã chạy ({run["date"]})', '', *_table(('mục', 'giá trị'), body), '']
    if run.get('notes'):
        lines += ['Ghi chú của lần chạy:', '']
        lines += [f'- {note}' for note in run['notes']]
        lines.append('')
    spec = find_spec(m['gpu'])
    if spec is not None:
        lines += [
            f'**Số liệu từ data sheet (không phải số đo)** của hàng ứng với {m["gpu"]}, theo '
            f'<{spec.source}>: {spec}. Các số lõi tensor là số cho ma trận dày (dense).',
            '',
        ]
    return lines


def _headlines(run: dict[str, Any]) -> list[str]:
    body = []
    for name, nb in run['notebooks'].items():
        marks = nb.get('artefacts') or {}
        extra = f'; {len(marks)} số đo hỏng ở phần (b)' if marks else ''
        body.append((f'`{name}`', f'{nb["status"]}, {nb["seconds"]:.1f} s{extra}', nb['headline']))
    return [
        '## Số liệu chính',
        '',
        'Mỗi dòng: notebook, trạng thái và thời gian chạy, các số liệu chính của nó.',
        '',
        *_table(('notebook', 'trạng thái', 'số liệu chính'), body),
        '',
    ]


def _notebook(name: str, nb: dict[str, Any]) -> list[str]:
    marks = nb.get('artefacts') or {}
    lines = [f'## {TITLES.get(name, name)}', '', f'`{name}.ipynb`: {nb["headline"]}', '']
    if nb.get('parameters'):
        lines += [f'Tham số: `{json.dumps(nb["parameters"], ensure_ascii=False)}`.', '']
    valid = rows(nb.get('results') or {}, marks)
    lines += ['**(a) Số đo hợp lệ**', '']
    if valid:
        lines += [*_table(('khóa', 'giá trị'), [(f'`{k}`', v) for k, v in valid]), '']
    else:
        lines += ['Notebook này không lưu kết quả nào.', '']
    if nb.get('probe'):
        lines += [f'Phép đo thêm. Nguồn: {nb.get("probe_source", "-")}.', '']
        probe = rows(nb['probe'], {})
        lines += [*_table(('khóa', 'giá trị'), [(f'`probe.{k}`', v) for k, v in probe]), '']
    if marks:
        body = [
            (f'`{k}`', fmt(lookup(nb['results'], k), k.split('.')), reason)
            for k, reason in marks.items()
        ]
        lines += ['**(b) Số đo hỏng (artefact) và lý do**', '']
        lines += [*_table(('khóa', 'giá trị đã lưu', 'vì sao sai'), body), '']
    else:
        lines += ['**(b) Số đo hỏng:** không có.', '']
    plot = f'{PLOTS}/plot-{name.replace("/", "__")}.png'
    if (PAGE.parent / plot).is_file():
        caption = (
            f'*Biểu đồ của `{name}`, do trình chạy notebook vẽ trong lần chạy này, chép nguyên.*'
        )
        if marks:
            keys = ', '.join(f'`{k}`' for k in marks)
            caption += (
                f' Biểu đồ vẽ cả các số đo hỏng của phần (b) ({keys}): đừng đọc chúng như '
                'hiệu năng của GPU.'
            )
        else:
            caption += ' Không có số nào của notebook này bị đánh dấu là số đo hỏng.'
        lines += [f'![{TITLES.get(name, name)}]({plot})', '', caption, '']
    return lines


def render(run: dict[str, Any], current: str | None = None) -> str:
    """The whole page for ``run`` (``current``: the version of today's notebooks)."""
    if current is None:
        import d2lhelpers

        current = d2lhelpers.__version__
    lines = [f'# Số đo trên một GPU thật: {run["machine"]["gpu"]}, ngày {run["date"]}', '']
    lines += [
        '<!-- Sinh ra bởi `PYTHONPATH=tools python -m gpucheck.page` từ '
        f'd2lhelpers/runs/{run["id"]}.json: đừng sửa tay. -->',
        '',
        INTRO.format(id=run['id']),
        '',
    ]
    if run['collection_version'] != current:
        lines += [
            OLD.format(version=run['collection_version'], commit=run['commit'], current=current),
            '',
        ]
    if any(nb.get('artefacts') for nb in run['notebooks'].values()):
        lines += [WHY, '']
    lines += _machine(run)
    lines += _headlines(run)
    for name, nb in run['notebooks'].items():
        lines += _notebook(name, nb)
    lines += [MAINTAINERS]
    return '\n'.join(lines) + '\n'


def load_run(path: Path = RUN) -> dict[str, Any]:
    return json.loads(path.read_text(encoding='utf-8'))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog='python -m gpucheck.page', description=__doc__)
    parser.add_argument('--check', action='store_true', help='chỉ so sánh, không ghi')
    args = parser.parse_args(argv)
    text = render(load_run())
    if args.check:
        old = PAGE.read_text(encoding='utf-8') if PAGE.is_file() else ''
        if old == text:
            print(f'gpucheck.page: {PAGE.relative_to(ROOT)} đúng với lần chạy')
            return 0
        diff = difflib.unified_diff(
            old.splitlines(), text.splitlines(), 'đã commit', 'sinh ra', lineterm='', n=1
        )
        print('\n'.join(list(diff)[:40]))
        print(f'gpucheck.page: {PAGE.relative_to(ROOT)} đã cũ: chạy python -m gpucheck.page')
        return 1
    PAGE.write_text(text, encoding='utf-8')
    print(f'gpucheck.page: đã ghi {PAGE.relative_to(ROOT)}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
