"""Reference GPU runs stored as data (``d2lhelpers/runs/*.json``, written by tools/gpucheck):
real GPU answers for a learner without a GPU. ``reference(notebook, *keys)`` prints figures
labelled as reference data, marks artefacts with their reason, and says when the run is older
than the notebooks.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from typing import Any

from . import __version__

_UNITS = (
    ('speedup', 'x'),
    ('ratio', 'x'),
    ('slowdown', 'x'),
    ('gflops', ' GFLOP/s'),
    ('gbs', ' GB/s'),
)


def _runs_dir() -> Any:
    return resources.files(__package__).joinpath('runs')


def reference_runs() -> list[str]:
    """The ids of the stored runs, oldest first (ids start with the GPU and end with the date)."""
    files = _runs_dir().iterdir()
    runs = [f.name[: -len('.json')] for f in files if f.name.endswith('.json')]
    return sorted(runs, key=lambda r: (r[-10:], r))


def load_run(run: str | None = None) -> dict[str, Any]:
    """The run ``run`` (an id; ``None``: the newest) as a dict."""
    runs = reference_runs()
    if run is None and runs:
        run = runs[-1]
    if run not in runs:
        raise ValueError(f'không có lần chạy tham khảo {run!r}; các lần chạy có: {runs}')
    text = _runs_dir().joinpath(f'{run}.json').read_text('utf-8')
    return json.loads(text)


def _lookup(entry: dict[str, Any], key: str) -> Any:
    node: Any = entry['probe'] if key.startswith('probe.') else entry.get('results', {})
    for part in key.split('.')[1:] if key.startswith('probe.') else key.split('.'):
        if not isinstance(node, dict) or part not in node:
            raise KeyError(f'lần chạy tham khảo không có khóa {key!r}')
        node = node[part]
    return node


def _format(value: Any, path: list[str]) -> str:
    if isinstance(value, dict):
        return ', '.join(f'{k}: {_format(v, [*path, k])}' for k, v in value.items())
    if isinstance(value, list):
        return '[' + ', '.join(_format(v, path) for v in value) + ']'
    if isinstance(value, bool) or value is None:
        return {True: 'đúng', False: 'sai', None: 'không có'}[value]
    if not isinstance(value, (int, float)):
        return str(value)
    for part in reversed(path):
        if part.endswith('_s'):
            from .timing import format_seconds

            return format_seconds(value)
        for word, unit in _UNITS:
            if word in part:
                return f'{value:.2f}{unit}' if unit == 'x' else f'{value:.0f}{unit}'
    return f'{value:g}'


@dataclass(frozen=True, repr=False)
class Reference:
    """Figures of one notebook in one reference run; ``ref[key]`` is the raw value."""

    run: dict[str, Any]
    notebook: str
    values: dict[str, Any]
    artefacts: dict[str, str]

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def header(self) -> str:
        m, sw = self.run['machine'], self.run['software']
        text = (
            f'Số đo tham khảo (dữ liệu lưu sẵn, không phải lần chạy này): {m["gpu"]} '
            f'× {m.get("gpu_count", 1)}, ngày {self.run["date"]}, TensorFlow {sw["tensorflow"]}, '
            f'notebook phiên bản {self.run["collection_version"]} (commit {self.run["commit"]})'
        )
        if self.run['collection_version'] != __version__:
            text += (
                f'\n  (phiên bản cũ hơn notebook này, {__version__}: mã đo đã đổi từ đó; '
                'khóa nào bị đánh dấu là số đo hỏng thì đừng tin)'
            )
        return text

    def __str__(self) -> str:
        lines = [self.header()]
        for key, value in self.values.items():
            line = f'  {key}: {_format(value, key.split("."))} (tham khảo)'
            if key in self.artefacts:
                line += f'\n    số đo hỏng (artefact): {self.artefacts[key]} (tham khảo)'
            lines.append(line)
        return '\n'.join(lines)

    __repr__ = __str__


def reference(notebook: str, *keys: str, run: str | None = None) -> Reference:
    """Figures ``keys`` (dotted paths: ``'median_s.device_once'``, ``'probe.speedup_by_n'``) that
    ``notebook`` (``'exercises/03-log-on-device'``) saved in a reference run (newest by default).

    A key is an artefact when it, or a key above it, is marked as one in the run.
    """
    data = load_run(run)
    name = notebook.removesuffix('.ipynb')
    if name not in data['notebooks']:
        raise ValueError(f'lần chạy {data["id"]} không có notebook {name!r}')
    entry = data['notebooks'][name]
    values = {key: _lookup(entry, key) for key in keys}
    marked = entry.get('artefacts', {})
    artefacts = {
        key: reason
        for key in keys
        for mark, reason in marked.items()
        if key == mark or key.startswith(mark + '.') or mark.startswith(key + '.')
    }
    return Reference(data, name, values, artefacts)
