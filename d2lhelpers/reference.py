"""Reference runs stored as data (``d2lhelpers/runs/*.json``, written only by ``gpucheck.record``,
whose docstring lists the fields of the one schema): real figures of other machines, read by
``reference``, ``compare_runs`` and ``host_ratio``. Every notebook names the run it quotes, so
adding a run to ``runs/`` changes no notebook.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from typing import Any

from . import __version__
from .results import save_results
from .timing import format_seconds

SCHEMA = 1

#: The one label of a GPU answer read from a stored run.
ANSWER = 'Đáp án trên GPU'
#: A number whose key holds one of these words is a ratio; else its unit is found by word.
RATIO_WORDS = ('speedup', 'ratio', 'slowdown', '_over_')
UNITS = {'gflops': ' GFLOP/s', 'gbs': ' GB/s'}


class ReferenceKeyError(LookupError):
    """A key that a run (or this run's results) does not have; the message names both."""


def _runs_dir() -> Any:
    return resources.files(__package__).joinpath('runs')


def reference_runs() -> list[str]:
    """The ids of the stored runs, oldest first (ids end with the date: ``h200-2026-11-30``)."""
    files = _runs_dir().iterdir()
    runs = [f.name[: -len('.json')] for f in files if f.name.endswith('.json')]
    return sorted(runs, key=lambda r: (r[-10:], r))


def load_run(run: str) -> dict[str, Any]:
    """The stored run ``run`` (its id) as a dict; a clear error for an unknown id or schema."""
    runs = reference_runs()
    if run not in runs:
        raise ValueError(f'không có lần chạy tham khảo {run!r}; các lần chạy có: {runs}')
    data = json.loads(_runs_dir().joinpath(f'{run}.json').read_text('utf-8'))
    if data.get('schema') != SCHEMA:
        raise ValueError(f'lần chạy {run!r} có schema {data.get("schema")!r}, cần schema {SCHEMA}')
    return data


def lookup(tree: dict[str, Any], key: str, where: str) -> Any:
    """The value at dotted ``key`` in ``tree``; ``where`` names the tree in the error."""
    node: Any = tree
    for part in key.split('.'):
        if not isinstance(node, dict) or part not in node:
            have = sorted(node) if isinstance(node, dict) else []
            raise ReferenceKeyError(
                f'{where} không có khóa {key!r} (thiếu {part!r}; ở đó có: {have})'
            )
        node = node[part]
    return node


def format_value(value: Any, path: list[str]) -> str:
    """A stored value as the notebooks print it, its unit chosen by its key (``*_s``: seconds);
    a dict's keys sorted, as a run file stores them."""
    if isinstance(value, dict):
        numeric = all(str(k).isdigit() for k in value)  # sizes, stored as JSON keys: by number
        keys = sorted(value, key=int if numeric else str)
        return ', '.join(f'{k}: {format_value(value[k], [*path, k])}' for k in keys)
    if isinstance(value, list):
        return '[' + ', '.join(format_value(v, path) for v in value) + ']'
    if isinstance(value, bool) or value is None:
        return {True: 'đúng', False: 'sai', None: 'không có'}[value]
    if not isinstance(value, (int, float)):
        return str(value)
    for part in reversed(path):
        if part.endswith('_s'):
            return format_seconds(value)
        if any(word in part for word in RATIO_WORDS):
            return f'{value:.2f}x'
        for word, unit in UNITS.items():
            if word in part:
                return f'{value:.0f}{unit}'
    return f'{value:g}'


def describe(run: dict[str, Any]) -> str:
    """One line naming a run's machine, date, software and notebook version."""
    m, sw = run['machine'], run['software']
    what = f'{m["gpu"]} × {m["gpu_count"]}' if m.get('gpu') else 'không GPU'
    commit = run.get('commit') or 'không rõ'
    text = (
        f'{run["id"]}: {what}, CPU {m.get("cpu_cores")} lõi, ngày {run["date"]}, TensorFlow '
        f'{sw["tensorflow"]}, notebook phiên bản {run["collection_version"]} (commit {commit})'
    )
    if run['collection_version'] != __version__:
        text += (
            f'\n  (cũ hơn notebook này, {__version__}: mã đo đã đổi từ đó; khóa nào bị đánh dấu '
            'là số đo hỏng thì đừng tin)'
        )
    return text


@dataclass(frozen=True, repr=False)
class Reference:
    """Figures ``keys`` of one notebook in one stored run; ``ref[key]`` is the raw value.

    ``header`` is the first line of a GPU answer: the one label, the mark "(tham khảo)" (once, for
    the whole block: tests/sanitize.cfg compares the lines below it up to a blank line as they
    are) and the run. The notebook prints its answer, sentences from ``ref[key]``, below it."""

    run: dict[str, Any]
    values: dict[str, Any]
    artefacts: dict[str, str]

    def __getitem__(self, key: str) -> Any:
        if key not in self.values:
            raise ReferenceKeyError(
                f'khóa {key!r} chưa được đọc từ lần chạy {self.run["id"]}: thêm nó vào '
                f'reference(...); đã đọc: {list(self.values)}'
            )
        return self.values[key]

    @property
    def header(self) -> str:
        return f'{ANSWER} (tham khảo), lần chạy {describe(self.run)}'


def reference(notebook: str, *keys: str, run: str) -> Reference:
    """Figures ``keys`` (dotted paths such as ``'median_s.device_once'``) that ``notebook``
    (``'exercises/03-log-on-device'``) saved in the stored run ``run`` (its id). A key is an
    artefact when it, or a key above or below it, is marked as one in the run."""
    data = load_run(run)
    name = notebook.removesuffix('.ipynb')
    entry = lookup(data['notebooks'], name, f'lần chạy {run}, mục notebooks,')
    where = f'lần chạy {run}, notebook {name},'
    values = {key: lookup(entry['results'], key, where) for key in keys}
    reasons = {key: artefact(entry, key) for key in keys}
    return Reference(data, values, {key: why for key, why in reasons.items() if why})


def artefact(entry: dict[str, Any], key: str) -> str | None:
    """Why ``key`` of a run's notebook ``entry`` is an artefact (marked itself, or a key above or
    below it), or None."""
    for mark, reason in entry['artefacts'].items():
        if key == mark or key.startswith(mark + '.') or mark.startswith(key + '.'):
            return reason
    return None


def compare_runs(
    notebook: str, rows: dict[str, str], *, this: dict[str, Any], runs: list[str]
) -> str:
    """A small table: for each ``label: key`` of ``rows`` (a dotted key of the saved results),
    this run's value (``this``: the dict given to ``save_results``) and each stored run's (by
    id), the latter with its ratio to this run's value, ``(1.23x)``; ``—`` where a run lacks it,
    ``số đo hỏng`` where the run marks it as an artefact.
    Columns have a fixed width, so a measured figure never moves the columns after it."""
    name = notebook.removesuffix('.ipynb')
    stored = [load_run(run) for run in runs]
    saved = save_results(this, None)  # as a run file stores them: JSON types, text keys
    width = max(map(len, rows))
    head = ''.join(f'  {h:<22}' for h in ['lần chạy này', *runs])
    lines = [
        'Lần chạy này so với các lần chạy lưu sẵn (trong ngoặc: số lưu sẵn / số của lần chạy này):'
    ]
    lines += [f'  {describe(data)}' for data in stored] + [' ' * width + head.rstrip()]
    for label, key in rows.items():
        mine = lookup(saved, key, 'kết quả của lần chạy này')
        cells = [format_value(mine, key.split('.'))]
        for data in stored:
            entry = lookup(data['notebooks'], name, f'lần chạy {data["id"]}')
            try:
                value = lookup(entry['results'], key, '')
            except ReferenceKeyError:
                cells.append('—')
                continue
            if artefact(entry, key):  # its reason is on the run's page, not in a lesson
                cells.append('số đo hỏng')
                continue
            ratio = isinstance(value, (int, float)) and isinstance(mine, (int, float)) and mine
            ratio = f' ({value / mine:.2f}x)' if ratio and not isinstance(value, bool) else ''
            cells.append(format_value(value, key.split('.')) + ratio)
        lines.append(f'{label:<{width}}' + ''.join(f'  {c:<22}' for c in cells).rstrip())
    return '\n'.join(lines)


def host_ratio(run: str) -> tuple[float, float, float]:
    """``(ratio, gpu, cpu)``: exercise 1's float32 GPU figure at its largest n (its probe, in
    GFLOP/s) over the best CPU figure measured on the same machine (any CPU row of exercise 1 or
    choose-a-gpu, at any n): the one GPU/CPU ratio of a run, whichever notebook prints it."""
    runs = load_run(run)['notebooks']
    ex1, choose = runs['exercises/01-cpu-vs-gpu-matmul'], runs['notebooks/choose-a-gpu']
    probe = ex1['results']['probe']['gflops']
    rows = [row for nb in (ex1, choose) for k, row in nb['results']['gflops'].items() if 'CPU' in k]
    cpu = max(v for row in rows for v in row.values() if v is not None)
    return probe[max(probe, key=int)] / cpu, probe[max(probe, key=int)], cpu
