"""Write the page of a stored run, ``docs/runs/<id>.md``, with its plots, from the run's data.

    PYTHONPATH=tools python -m gpucheck.page [ID ...]          # write (default: every run)
    PYTHONPATH=tools python -m gpucheck.page [ID ...] --check  # exit 1 if a page is stale

Every figure on a page comes from ``d2lhelpers/runs/<id>.json`` (the run, its notes, the figures
marked as artefacts with their reasons); values are printed by ``d2lhelpers.reference``'s own
formatter, the one the notebooks use; the plots (``docs/runs/<id>/*.png``) are drawn from the
same data; the data-sheet row comes from ``d2lhelpers.datasheets``. The only other text is the
fixed explanation below. ``--check`` compares the text; the plots are drawn when writing.
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from pathlib import Path
from typing import Any

from d2lhelpers.datasheets import find_spec
from d2lhelpers.reference import format_value, load_run, lookup, reference_runs

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / 'docs' / 'runs'  # docs/runs/<id>.md, its plots in docs/runs/<id>/<notebook>-<key>.png

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


# -- values, as the notebooks print them ---------------------------------------------------


def _marked(key: str, marks: dict[str, str]) -> bool:
    return any(key == m or key.startswith(m + '.') for m in marks)


def rows(tree: dict[str, Any], marks: dict[str, str], prefix: str = '') -> list[tuple[str, str]]:
    """(dotted key, value as ``d2lhelpers.reference`` prints it) of ``tree``, leaving out the
    subtrees in ``marks``. A dict keyed by sizes (``{'16': ..., '32': ...}``) is one row.
    """
    out = []
    for k, v in tree.items():
        key = f'{prefix}{k}'
        if _marked(key, marks):
            continue
        if isinstance(v, dict) and v and not all(str(x).isdigit() for x in v):
            out += rows(v, marks, key + '.')
        else:
            out.append((key, format_value(v, key.split('.'))))
    return out


# -- plots, drawn from the run's data ----------------------------------------------------------


def _numbers(d: Any) -> bool:
    return (
        isinstance(d, dict)
        and bool(d)
        and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in d.values())
    )


def plots(results: dict[str, Any]) -> dict[str, str]:
    """The plots a notebook's results allow: ``{'gflops': title, 'median_s': title}``."""
    out = {}
    gflops = results.get('gflops')
    if isinstance(gflops, dict) and any(_numbers(v) for v in gflops.values()):
        out['gflops'] = 'GFLOP/s theo n (ma trận n × n), mỗi thiết bị một đường'
    if _numbers(results.get('median_s')):
        out['median_s'] = 'Thời gian (trung vị) của từng cách chạy'
    return out


def draw(results: dict[str, Any], key: str, marks: dict[str, str], path: Path) -> None:
    """Draw the plot ``key`` of ``plots(results)`` into ``path`` (PNG, no timestamp)."""
    import matplotlib

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    if key == 'gflops':
        for dev, points in results['gflops'].items():
            if not _numbers(points):
                continue
            ns = sorted(points, key=int)
            bad = _marked(f'gflops.{dev}', marks)
            label = f'{dev} (số đo hỏng)' if bad else dev
            style = dict(ls='--', mfc='white') if bad else {}
            ax.plot([int(n) for n in ns], [points[n] for n in ns], marker='o', label=label, **style)
        ax.set(xscale='log', yscale='log', xlabel='n', ylabel='GFLOP/s')
        ax.legend(fontsize=8)
    else:
        times = results['median_s']
        ax.barh(list(times), [t * 1e3 for t in times.values()])
        ax.set(xscale='log', xlabel='ms (trục log)')
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=80, metadata={'Software': None})
    plt.close(fig)


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
            f'{run["date"]}, {run["collection_version"]} (commit `{run["commit"] or "không rõ"}`)',
        ),
        (
            'GPU',
            f'{m["gpu_count"]} × {m["gpu"]}, compute capability {m["compute_capability"]}; '
            f'bộ nhớ: {m["gpu_memory"]}'
            if m['gpu']
            else 'không có',
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
        ('kiểm thử gpu (pytest -m gpu)', format_value(run['gpu_tests'], ['gpu_tests'])),
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
        took = format_value(nb['seconds'], ['seconds_s'])
        body.append((f'`{name}`', f'{nb["status"]}, {took}{extra}', nb['headline']))
    return [
        '## Số liệu chính',
        '',
        'Mỗi dòng: notebook, trạng thái và thời gian chạy, các số liệu chính của nó.',
        '',
        *_table(('notebook', 'trạng thái', 'số liệu chính'), body),
        '',
    ]


def _notebook(run_id: str, name: str, nb: dict[str, Any], folder: Path | None) -> list[str]:
    marks = nb.get('artefacts') or {}
    lines = [f'## {TITLES.get(name, name)}', '', f'`{name}.ipynb`: {nb["headline"]}', '']
    if nb.get('parameters'):
        lines += [f'Tham số: `{json.dumps(nb["parameters"], ensure_ascii=False)}`.', '']
    valid = rows(nb['results'], marks)
    lines += ['**(a) Số đo hợp lệ**', '']
    if valid:
        lines += [*_table(('khóa', 'giá trị'), [(f'`{k}`', v) for k, v in valid]), '']
    else:
        lines += ['Notebook này không lưu kết quả nào.', '']
    if marks:
        where = f'lần chạy {run_id}, notebook {name},'
        body = [
            (f'`{k}`', format_value(lookup(nb['results'], k, where), k.split('.')), reason)
            for k, reason in marks.items()
        ]
        lines += ['**(b) Số đo hỏng (artefact) và lý do**', '']
        lines += [*_table(('khóa', 'giá trị đã lưu', 'vì sao sai'), body), '']
    else:
        lines += ['**(b) Số đo hỏng:** không có.', '']
    for key, title in plots(nb['results']).items():
        png = f'{name.replace("/", "__")}-{key}.png'
        if folder is not None:
            folder.mkdir(parents=True, exist_ok=True)
            draw(nb['results'], key, marks, folder / png)
        bad = [k for k in marks if k == key or k.startswith(key + '.')]
        caption = f'*{title}: vẽ từ `{key}` của lần chạy.*'
        if bad:
            caption += ' Đường nét đứt là số đo hỏng của phần (b): đừng đọc chúng như hiệu năng.'
        lines += [f'![{title}]({run_id}/{png})', '', caption, '']
    return lines


def page_path(run_id: str) -> Path:
    return DOCS / f'{run_id}.md'


def render(run: dict[str, Any], current: str | None = None, plots_to: Path | None = None) -> str:
    """The whole page for ``run`` (``current``: the version of today's notebooks); its plots are
    drawn into ``plots_to`` when given."""
    if current is None:
        import d2lhelpers

        current = d2lhelpers.__version__
    what = run['machine']['gpu'] or 'máy không có GPU'
    lines = [f'# Số đo của lần chạy {run["id"]}: {what}, ngày {run["date"]}', '']
    lines += [
        '<!-- Sinh ra bởi `PYTHONPATH=tools python -m gpucheck.page` từ '
        f'd2lhelpers/runs/{run["id"]}.json: đừng sửa tay. -->',
        '',
        INTRO.format(id=run['id']),
        '',
    ]
    if run['collection_version'] != current:
        commit = run['commit'] or 'không rõ'
        lines += [
            OLD.format(version=run['collection_version'], commit=commit, current=current),
            '',
        ]
    if any(nb['artefacts'] for nb in run['notebooks'].values()):
        lines += [WHY, '']
    lines += _machine(run)
    lines += _headlines(run)
    for name, nb in run['notebooks'].items():
        lines += _notebook(run['id'], name, nb, plots_to)
    lines += [MAINTAINERS]
    return '\n'.join(lines) + '\n'


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog='python -m gpucheck.page', description=__doc__)
    parser.add_argument('runs', nargs='*', help='id của các lần chạy (mặc định: mọi lần chạy)')
    parser.add_argument('--check', action='store_true', help='chỉ so sánh, không ghi')
    args = parser.parse_args(argv)
    stale = 0
    for run_id in args.runs or reference_runs():
        path = page_path(run_id)
        shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        if not args.check:
            text = render(load_run(run_id), plots_to=DOCS / run_id)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding='utf-8')
            print(f'gpucheck.page: đã ghi {shown}')
            continue
        text = render(load_run(run_id))
        old = path.read_text(encoding='utf-8') if path.is_file() else ''
        if old == text:
            print(f'gpucheck.page: {shown} đúng với lần chạy')
            continue
        stale += 1
        diff = difflib.unified_diff(
            old.splitlines(), text.splitlines(), 'đã commit', 'sinh ra', lineterm='', n=1
        )
        print('\n'.join(list(diff)[:40]))
        print(f'gpucheck.page: {shown} đã cũ: chạy python -m gpucheck.page {run_id}')
    return 1 if stale else 0


if __name__ == '__main__':
    sys.exit(main())
