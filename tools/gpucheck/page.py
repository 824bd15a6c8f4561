"""Write the page of a stored run, ``docs/runs/<id>.md``, with its plots, from the run's data.

    PYTHONPATH=tools python -m gpucheck.page [ID ...]          # default: every stored run

Every figure on a page comes from ``d2lhelpers/runs/<id>.json`` (the run, its notes, the figures
marked as artefacts with their reasons); values are printed by ``d2lhelpers.reference``'s own
formatter, the one the notebooks use; the plots (``docs/runs/<id>/*.png``) are drawn from the
same data; the data-sheet row comes from ``d2lhelpers.datasheets``. The only other text is the
fixed text in ``page.md``, in one of two forms: a GPU run's, or a CPU run's (a run whose machine
has no GPU: no GPU wording, no driver, CUDA or ``pytest -m gpu`` rows). A missing value is
printed as "không có", never as Python's ``None`` (also where a stored headline or note carries
one). tests/tools/test_record_page.py checks that the committed pages are the rendered ones.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from nbrun.atomic import atomic_write
from nbrun.report import table_cell

import d2lhelpers
from d2lhelpers.datasheets import find_spec
from d2lhelpers.reference import artefact, format_value, load_run, lookup, reference_runs

from .check import number

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / 'docs' / 'runs'  # docs/runs/<id>.md, its plots in docs/runs/<id>/<notebook>-<key>.png


def texts() -> dict[str, str]:
    """The fixed text of a page (``page.md`` beside this module), by section name."""
    parts = re.split(
        r'^@@ (\w+)\n', (Path(__file__).parent / 'page.md').read_text('utf-8'), flags=re.M
    )
    return {name: body.strip() for name, body in zip(parts[1::2], parts[2::2], strict=True)}


TEXT = texts()
TITLES = dict(line.split(' | ') for line in TEXT['TITLES'].splitlines())


def _words(text: str) -> str:
    """A stored text as the page prints it: Python's ``None`` in it becomes "không có"."""
    return re.sub(r'\bNone\b', 'không có', text)


# -- values, as the notebooks print them ---------------------------------------------------


def rows(tree: dict[str, Any], nb: dict[str, Any], prefix: str = '') -> list[tuple[str, str]]:
    """(dotted key, value as ``d2lhelpers.reference`` prints it) of ``tree`` (the results of the
    run's notebook ``nb``), leaving out what ``reference`` calls an artefact. A dict keyed by sizes
    (``{'16': ..., '32': ...}``) is one row.
    """
    out = []
    for k, v in tree.items():
        key = f'{prefix}{k}'
        if isinstance(v, dict) and v and not all(str(x).isdigit() for x in v):
            out += rows(v, nb, key + '.')
        elif not artefact(nb, key):
            out.append((key, format_value(v, key.split('.'))))
    return out


# -- plots, drawn from the run's data ----------------------------------------------------------


def _numbers(d: Any) -> bool:
    """A non-empty dict of numbers > 0: what a log-scale plot can draw."""
    return isinstance(d, dict) and bool(d) and all(map(number, d.values()))


def plots(results: dict[str, Any]) -> dict[str, str]:
    """The plots a notebook's results allow: ``{'gflops': title, 'median_s': title}``."""
    out = {}
    gflops = results.get('gflops')
    if isinstance(gflops, dict) and any(_numbers(v) for v in gflops.values()):
        out['gflops'] = 'GFLOP/s theo n (ma trận n × n), mỗi thiết bị một đường'
    if _numbers(results.get('median_s')):
        out['median_s'] = 'Thời gian (trung vị) của từng cách chạy'
    return out


def draw(nb: dict[str, Any], key: str, path: Path) -> None:
    """Draw the plot ``key`` of ``plots(nb['results'])`` into ``path`` (PNG, no timestamp)."""
    results = nb['results']
    import matplotlib

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    if key == 'gflops':
        for dev, points in results['gflops'].items():
            if not _numbers(points):
                continue
            ns = sorted(points, key=int)
            bad = artefact(nb, f'gflops.{dev}')
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


def _table(header: tuple[str, ...], body: list[tuple[str, ...]]) -> list[str]:
    lines = ['| ' + ' | '.join(header) + ' |', '|' + '---|' * len(header)]
    lines += ['| ' + ' | '.join(table_cell(c) for c in r) + ' |' for r in body]
    return lines


# -- the page --------------------------------------------------------------------------------


def _machine(run: dict[str, Any]) -> list[str]:
    m, sw, gpu = run['machine'], run['software'], bool(run['machine']['gpu'])
    version = f'{run["collection_version"]} (commit `{run["commit"] or "không rõ"}`)'
    body = [('ngày chạy, phiên bản notebook', f'{run["date"]}, {version}')]
    cuda = f' (CUDA {sw["tf_cuda"]}, cuDNN {sw["cudnn"]})' if gpu else ''
    gpus = f'{m["gpu_count"]} × {m["gpu"]}, compute capability {m["compute_capability"]}'
    body += [('GPU', f'{gpus}; bộ nhớ: {m["gpu_memory"]}' if gpu else 'không có')]
    if gpu:
        driver = f'driver {m["driver"]}, thư viện CUDA: {m["cuda_libraries"]}'
        body += [('trình điều khiển (driver), thư viện CUDA', driver)]
    body += [
        ('TensorFlow', f'{sw["tensorflow"]}{cuda}'),
        ('Keras, NumPy', f'Keras {sw["keras"]}, NumPy {sw["numpy"]}'),
        ('Python, hệ điều hành', f'Python {m["python"]}, `{m["platform"]}`'),
        ('CPU', f'{m["cpu_cores"]} lõi'),
        ('lệnh', f'`{run["command"]}`'),
    ]
    if gpu:
        body.append(('kiểm thử gpu (pytest -m gpu)', format_value(run['gpu_tests'], ['gpu_tests'])))
    body = [(k, _words(v)) for k, v in body]
    lines = [f'## Máy đã chạy ({run["date"]})', '', *_table(('mục', 'giá trị'), body), '']
    if run.get('notes'):
        lines += ['Ghi chú của lần chạy:', '', *[f'- {_words(note)}' for note in run['notes']], '']
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
        body.append((f'`{name}`', f'{nb["status"]}, {took}{extra}', _words(nb['headline'])))
    return [
        '## Số liệu chính',
        '',
        'Mỗi dòng: notebook, trạng thái và thời gian chạy, các số liệu chính của nó.',
        '',
        *_table(('notebook', 'trạng thái', 'số liệu chính'), body),
        '',
    ]


def _notebook(run: dict[str, Any], name: str, folder: Path | None) -> list[str]:
    run_id, nb = run['id'], run['notebooks'][name]
    marks = nb.get('artefacts') or {}
    head = _words(nb['headline'])
    lines = [f'## {TITLES.get(name, name)}', '', f'`{name}.ipynb`: {head}', '']
    if nb.get('parameters'):
        lines += [f'Tham số: `{json.dumps(nb["parameters"], ensure_ascii=False)}`.', '']
    valid = rows(nb['results'], nb)
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
            draw(nb, key, folder / png)
        caption = f'*{title}: vẽ từ `{key}` của lần chạy.*'
        if artefact(nb, key):
            caption += ' Đường nét đứt là số đo hỏng của phần (b): đừng đọc chúng như hiệu năng.'
        lines += [f'![{title}]({run_id}/{png})', '', caption, '']
    return lines


def page_path(run_id: str) -> Path:
    return DOCS / f'{run_id}.md'


def render(run: dict[str, Any], plots_to: Path | None = None) -> str:
    """The whole page for ``run``; its plots are drawn into ``plots_to`` when given."""
    gpu, current = bool(run['machine']['gpu']), d2lhelpers.__version__
    what = run['machine']['gpu'] if gpu else 'máy không có GPU'
    parts = [TEXT['HEAD'].format(id=run['id'], date=run['date'], what=what)]
    parts.append(TEXT['INTRO_GPU'] if gpu else TEXT['INTRO_CPU'].format(**run['machine']))
    source = [TEXT['SOURCE'].format(id=run['id'])]
    if any('probe' in nb['results'] for nb in run['notebooks'].values()):
        source.append(TEXT['PROBES'])
    if gpu and find_spec(run['machine']['gpu']) is not None:
        source.append(TEXT['DATASHEET'])
    parts.append('\n'.join(source))
    if run['collection_version'] != current:
        version, commit = run['collection_version'], run['commit'] or 'không rõ'
        parts.append(TEXT['OLD'].format(version=version, commit=commit, current=current))
    if any(nb['artefacts'] for nb in run['notebooks'].values()):
        parts.append(TEXT['WHY'])
    lines = [*_machine(run), *_headlines(run)]
    for name in run['notebooks']:
        lines += _notebook(run, name, plots_to)
    parts += [
        '\n'.join(lines).strip(),
        TEXT['MAINTAINERS'].format(how=TEXT[f'HOW_{"GPU" if gpu else "CPU"}']),
    ]
    return '\n\n'.join(parts) + '\n'


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog='python -m gpucheck.page', description=__doc__)
    parser.add_argument('runs', nargs='*', help='id của các lần chạy (mặc định: mọi lần chạy)')
    for run_id in parser.parse_args(argv).runs or reference_runs():
        path = page_path(run_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, render(load_run(run_id), plots_to=DOCS / run_id))
        print(f'gpucheck.page: đã ghi {path}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
