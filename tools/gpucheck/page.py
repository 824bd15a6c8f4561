"""Write the page of a stored run, ``docs/runs/<id>.md``, with its plots, from the run's data.

    PYTHONPATH=tools python -m gpucheck.page [ID ...]          # write (default: every run)
    PYTHONPATH=tools python -m gpucheck.page [ID ...] --check  # exit 1 if a page is stale

Every figure on a page comes from ``d2lhelpers/runs/<id>.json`` (the run, its notes, the figures
marked as artefacts with their reasons); values are printed by ``d2lhelpers.reference``'s own
formatter, the one the notebooks use; the plots (``docs/runs/<id>/*.png``) are drawn from the
same data; the data-sheet row comes from ``d2lhelpers.datasheets``. The only other text is the
fixed explanation below, in one of two forms: a GPU run's, or a CPU run's (a run whose machine has
no GPU: no GPU wording, no driver, CUDA or ``pytest -m gpu`` rows). A missing value is printed as
"không có", never as Python's ``None`` (also where a stored headline or note carries one). Two
stored texts get a note of the page: the run note "TF32 bật/tắt khi `env_report()` chạy" (it
describes TensorFlow's default, that is the notebooks that leave TF32 alone), and a headline's
target ("mục tiêu ...") in a run of an older version (a target today's notebooks no longer have).
``--check`` compares the text; the plots are drawn when writing.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
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

INTRO_GPU = """\
Các notebook của bộ sổ tay được lưu kèm kết quả chạy trên một máy không có GPU. Trang này dành
cho bạn đọc chưa có GPU: nó cho xem số đo thật của một lần chạy cả bộ sổ tay trên một GPU, bằng
trình chạy notebook (`nbrun`) của chính bộ sổ tay, đặt cạnh số đo CPU của cùng máy."""

INTRO_CPU = """\
Trang này cho xem số đo của một lần chạy cả bộ sổ tay trên một máy không có GPU (CPU {cores} lõi),
bằng trình chạy notebook (`nbrun`) của chính bộ sổ tay. Các notebook trích nó làm lần chạy tham
khảo trên CPU, để bạn đặt số đo của máy mình cạnh số đo của một máy chỉ có CPU."""

SOURCE = """\
**Số liệu lấy từ đâu.** Mọi số trên trang lấy từ lần chạy lưu dưới dạng dữ liệu trong gói:
[`d2lhelpers/runs/{id}.json`](../../d2lhelpers/runs/{id}.json). Trong một notebook,
`d2lhelpers.reference` đọc cùng tệp ấy (cả trên Colab). Khóa của một số (ví dụ
`median_s.device_once`) là đường dẫn của nó trong kết quả notebook đã lưu."""

PROBES = """\
*Phép đo thêm* là các phép đo TensorFlow thuần làm trong cùng phiên, trên cùng loại máy, để trả
lời điều mà notebook đo sai."""

DATASHEET = 'Số liệu từ data sheet là số nhà sản xuất công bố, không phải số đo.'

#: A run note as gpucheck.record writes it, and what the page adds to it.
TF32_NOTE = re.compile(r'^TF32 (bật|tắt) khi `env_report\(\)` chạy\.$')
TF32_MEANING = (
    'TF32 {state} khi `env_report()` chạy (trong một tiến trình riêng, với thiết lập mặc định của '
    'TensorFlow): câu này chỉ nói về các notebook để TF32 ở mặc định. Các notebook tắt TF32 ở mọi '
    'kết quả ghi là float32; khóa `tf32` trong kết quả của một notebook (nếu có) ghi giá trị mà '
    'notebook ấy dùng.'
)
#: A target in a stored headline, and its verdict: "(mục tiêu ≤ 1.2x: không đạt trên GPU)".
TARGET = re.compile(r'\((mục tiêu [^():]*?)(?:: ([^()]*))?\)')
TARGET_NOTE = (
    ' *(Ghi chú của trang: "{target}" là mục tiêu của phiên bản {version}; các notebook hiện nay'
    ' ({current}) không còn mục tiêu này, nên "{verdict}" chỉ là dữ liệu lịch sử của lần chạy,'
    ' không phải một kết luận của notebook hiện nay.)*'
)

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
tay. `tests/tools/test_record_page.py` kiểm tra rằng trang đã commit đúng bằng trang sinh ra, và
rằng mọi khóa đánh dấu artefact có trong kết quả. {how}"""

HOW_GPU = """\
Lưu một lần chạy mới trên máy có GPU:
`make gpu-check` (chạy mọi notebook vào `build/gpu-check/` rồi kiểm tra lần chạy), sau đó
`PYTHONPATH=tools python -m gpucheck.record build/gpu-check --id <gpu>-<ngày> --driver <driver>`
ghi `d2lhelpers/runs/<gpu>-<ngày>.json`; đánh dấu các số đo hỏng trong `artefacts` của notebook, mỗi
khóa một câu lý do."""

HOW_CPU = """\
Lưu một lần chạy mới trên máy chỉ có CPU:
`make run` (chạy mọi notebook vào `build/`), sau đó
`PYTHONPATH=tools python -m gpucheck.record build --id cpu<số lõi>-<ngày>` ghi
`d2lhelpers/runs/cpu<số lõi>-<ngày>.json`."""


def _words(text: str) -> str:
    """A stored text as the page prints it: Python's ``None`` in it becomes "không có"."""
    return re.sub(r'\bNone\b', 'không có', text)


def _value(value: Any) -> str:
    return 'không có' if value is None else str(value)


def _has_gpu(run: dict[str, Any]) -> bool:
    return bool(run['machine']['gpu'])


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
        )
    ]
    tf = _value(sw['tensorflow'])
    if _has_gpu(run):
        body += [
            (
                'GPU',
                f'{m["gpu_count"]} × {m["gpu"]}, compute capability '
                f'{_value(m["compute_capability"])}; bộ nhớ: {_value(m["gpu_memory"])}',
            ),
            (
                'trình điều khiển (driver), thư viện CUDA',
                f'driver {_value(m["driver"])}, thư viện CUDA: {_value(m["cuda_libraries"])}'
                if m['driver'] is None or m['cuda_libraries'] is None
                else f'driver {m["driver"]}, {m["cuda_libraries"]}',
            ),
        ]
        tf += f' (CUDA {_value(sw["tf_cuda"])}, cuDNN {_value(sw["cudnn"])})'
    else:
        body.append(('GPU', 'không có'))
    body += [
        ('TensorFlow', tf),
        ('Keras, NumPy', f'Keras {_value(sw["keras"])}, NumPy {_value(sw["numpy"])}'),
        ('Python, hệ điều hành', f'Python {_value(m["python"])}, `{_value(m["platform"])}`'),
        ('CPU', f'{_value(m["cpu_cores"])} lõi'),
        ('lệnh', f'`{_value(run["command"])}`'),
    ]
    if _has_gpu(run):
        body.append(('kiểm thử gpu (pytest -m gpu)', format_value(run['gpu_tests'], ['gpu_tests'])))
    lines = [f'## Máy đã chạy ({run["date"]})', '', *_table(('mục', 'giá trị'), body), '']
    if run.get('notes'):
        lines += ['Ghi chú của lần chạy:', '']
        lines += [f'- {_note(note)}' for note in run['notes']]
        lines.append('')
    spec = find_spec(m['gpu'])
    if spec is not None:
        lines += [
            f'**Số liệu từ data sheet (không phải số đo)** của hàng ứng với {m["gpu"]}, theo '
            f'<{spec.source}>: {spec}. Các số lõi tensor là số cho ma trận dày (dense).',
            '',
        ]
    return lines


def _note(note: str) -> str:
    found = TF32_NOTE.match(note)
    return TF32_MEANING.format(state=found.group(1)) if found else _words(note)


def _headline(run: dict[str, Any], nb: dict[str, Any], current: str) -> str:
    """A notebook's stored headline, with the page's note on a target its version no longer has."""
    text = _words(nb['headline'])
    if run['collection_version'] != current:
        for found in TARGET.finditer(text):
            text += TARGET_NOTE.format(
                target=found.group(1),
                verdict=found.group(2) or found.group(1),
                version=run['collection_version'],
                current=current,
            )
    return text


def _headlines(run: dict[str, Any], current: str) -> list[str]:
    body = []
    for name, nb in run['notebooks'].items():
        marks = nb.get('artefacts') or {}
        extra = f'; {len(marks)} số đo hỏng ở phần (b)' if marks else ''
        took = format_value(nb['seconds'], ['seconds_s'])
        body.append((f'`{name}`', f'{nb["status"]}, {took}{extra}', _headline(run, nb, current)))
    return [
        '## Số liệu chính',
        '',
        'Mỗi dòng: notebook, trạng thái và thời gian chạy, các số liệu chính của nó.',
        '',
        *_table(('notebook', 'trạng thái', 'số liệu chính'), body),
        '',
    ]


def _notebook(run: dict[str, Any], name: str, current: str, folder: Path | None) -> list[str]:
    run_id, nb = run['id'], run['notebooks'][name]
    marks = nb.get('artefacts') or {}
    head = _headline(run, nb, current)
    lines = [f'## {TITLES.get(name, name)}', '', f'`{name}.ipynb`: {head}', '']
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
    gpu = _has_gpu(run)
    what = run['machine']['gpu'] if gpu else 'máy không có GPU'
    lines = [f'# Số đo của lần chạy {run["id"]}: {what}, ngày {run["date"]}', '']
    lines += [
        '<!-- Sinh ra bởi `PYTHONPATH=tools python -m gpucheck.page` từ '
        f'd2lhelpers/runs/{run["id"]}.json: đừng sửa tay. -->',
        '',
        INTRO_GPU if gpu else INTRO_CPU.format(cores=_value(run['machine']['cpu_cores'])),
        '',
    ]
    source = [SOURCE.format(id=run['id'])]
    if any('probe' in nb['results'] for nb in run['notebooks'].values()):
        source.append(PROBES)
    if gpu and find_spec(run['machine']['gpu']) is not None:
        source.append(DATASHEET)
    lines += ['\n'.join(source), '']
    if run['collection_version'] != current:
        commit = run['commit'] or 'không rõ'
        lines += [
            OLD.format(version=run['collection_version'], commit=commit, current=current),
            '',
        ]
    if any(nb['artefacts'] for nb in run['notebooks'].values()):
        lines += [WHY, '']
    lines += _machine(run)
    lines += _headlines(run, current)
    for name in run['notebooks']:
        lines += _notebook(run, name, current, plots_to)
    lines += [MAINTAINERS.format(how=HOW_GPU if gpu else HOW_CPU)]
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
