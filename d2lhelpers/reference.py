"""Reference runs stored as data (``d2lhelpers/runs/*.json``, written only by ``gpucheck.record``,
whose docstring lists the fields of the one schema): real figures of other machines.

``reference(notebook, *keys, run=ID)`` prints the figures ``keys`` of one named run, labelled as
reference data, with the artefacts of that run marked and their reasons. Every notebook names
the run it quotes, so adding a run to ``runs/`` changes no notebook. ``this=results`` prints this
run's value of each key above the stored one, so both can be read side by side.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from typing import Any

from . import __version__
from .results import save_results

SCHEMA = 1

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
            from .timing import format_seconds

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
    """Figures ``keys`` of one notebook in one stored run; ``ref[key]`` is the raw value."""

    run: dict[str, Any]
    notebook: str
    values: dict[str, Any]
    artefacts: dict[str, str]
    this: dict[str, Any] | None = None

    def __getitem__(self, key: str) -> Any:
        if key not in self.values:
            raise ReferenceKeyError(
                f'khóa {key!r} chưa được đọc từ lần chạy {self.run["id"]}: thêm nó vào '
                f'reference(...); đã đọc: {list(self.values)}'
            )
        return self.values[key]

    def __str__(self) -> str:
        lines = ['Số đo tham khảo (dữ liệu lưu sẵn) của ' + describe(self.run)]
        for key, value in self.values.items():
            path = key.split('.')
            lines.append(f'  {key}:')
            if self.this is not None:
                lines.append(f'    lần chạy này: {format_value(self.this[key], path)}')
            lines.append(f'    {self.run["id"]}: {format_value(value, path)} (tham khảo)')
            if key in self.artefacts:
                lines.append(f'    số đo hỏng (artefact): {self.artefacts[key]} (tham khảo)')
        return '\n'.join(lines)

    __repr__ = __str__


def reference(notebook: str, *keys: str, run: str, this: dict[str, Any] | None = None) -> Reference:
    """Figures ``keys`` (dotted paths such as ``'median_s.device_once'``) that ``notebook``
    (``'exercises/03-log-on-device'``) saved in the stored run ``run`` (its id).

    ``this``: this run's results (the dict given to ``save_results``); each key is then read from
    it too and printed above the stored value. A key is an artefact when it, or a key above or
    below it, is marked as one in the run.
    """
    data = load_run(run)
    name = notebook.removesuffix('.ipynb')
    entry = lookup(data['notebooks'], name, f'lần chạy {run}, mục notebooks,')
    where = f'lần chạy {run}, notebook {name},'
    values = {key: lookup(entry['results'], key, where) for key in keys}
    mine = None
    if this is not None:
        saved = save_results(this, None)  # as a run file stores them: JSON types, text keys
        mine = {key: lookup(saved, key, 'kết quả của lần chạy này') for key in keys}
    artefacts = {
        key: reason
        for key in keys
        for mark, reason in entry['artefacts'].items()
        if key == mark or key.startswith(mark + '.') or mark.startswith(key + '.')
    }
    return Reference(data, name, values, artefacts, mine)
