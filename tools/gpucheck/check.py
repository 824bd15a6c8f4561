"""The GPU acceptance checks: pure functions over a run (``d2lhelpers/runs/*.json``, schema 1).

This module holds the names (notebooks, checks, ``REQUIRED``), a ``Finding``, the ``Checker`` a
rule adds findings to, and ``check_run``; the rules live by what they check: ``presence`` (what
the run holds), ``sheet`` (figures against the GPU's data sheet), ``order`` (figures against
each other). Every threshold follows from physics or from the data-sheet row
(``d2lhelpers.datasheets.find_spec``) of the GPU that produced the figure, never from one
machine's numbers.

Every run is held to what today's notebooks save (``REQUIRED``): a missing key is one failure,
and a rule reads a notebook only when it holds the keys that rule needs. A figure labelled
``/GPU:k`` is judged by the row of ``machine.gpus`` whose ``device`` is ``/GPU:k``; a GPU
without a data-sheet row (a MIG slice, a name not in DATASHEETS) makes its data-sheet checks
*chưa kiểm* (unchecked): counted, never a pass, and not a failure. A run without any GPU fails
exactly ``NO_GPU_CHECKS``. A rule that meets a value of the wrong shape fails the run with the
rule's name and the error; it never stops the other rules.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from d2lhelpers import __version__
from d2lhelpers.datasheets import GPUSpec, find_spec
from d2lhelpers.reference import load_run, reference_runs

EX1 = 'exercises/01-cpu-vs-gpu-matmul'
EX2 = 'exercises/02-parameters-on-gpu'
EX3 = 'exercises/03-log-on-device'
EX4 = 'exercises/04-two-gpu-matmul'
CHOOSE = 'notebooks/choose-a-gpu'
DP = 'notebooks/data-parallel'
USE = 'notebooks/use-gpu'

#: The finding states, as the table prints them.
OK, FAILED, UNCHECKED = 'ok', 'HỎNG', 'chưa kiểm'

#: Check names.
STATUS = 'trạng thái'
HAS_NOTEBOOK = 'có notebook'
KEYS = 'khóa kết quả'
GPU_TESTS = 'kiểm thử gpu'
HAS_GPU = 'có GPU'
FINITE = 'số đo hữu hạn, > 0'
WEIGHT_DIFF = 'max_abs_weight_diff'
SAME_JIT = 'cùng jit_compile'
FP32_PEAK = 'float32 ≤ đỉnh FP32'
FP32_LOW = 'float32 ≥ 20% đỉnh FP32'
TF32_GAIN = 'TF32 nhanh hơn float32'
BANDWIDTH = 'băng thông so với data sheet'
OFF_FLOOR = 'không ở mức sàn'
CEILING = 'trần không ở mức sàn'
ORDER = 'thứ tự thời gian'
SPEEDUP = 'tăng tốc bài 4'
CROSSOVER = 'điểm giao'
RULE_ERROR = 'đọc được kết quả'
EQUALITY_KEYS = ('logs_equal', 'restored_equal', 'workers_equal', 'sums_equal', 'weights_match')

#: What a run without any GPU fails, and nothing else.
NO_GPU_CHECKS = frozenset({HAS_GPU, GPU_TESTS})


def _required() -> dict[str, tuple[str, ...]]:
    """What today's notebooks save, by notebook: the keys of the results of the newest stored run
    of this version made without a GPU (tests/tools/test_contracts.py holds them equal to what
    the notebooks' save cells save, on every branch)."""
    runs = [load_run(r) for r in reference_runs()]
    cpu = [r for r in runs if not r['machine']['gpu'] and r['collection_version'] == __version__]
    if not cpu:
        raise RuntimeError(f'không có lần chạy CPU nào của phiên bản {__version__} trong runs/')
    return {name: tuple(nb['results']) for name, nb in cpu[-1]['notebooks'].items()}


#: What the current notebooks save, every key of which a run must hold.
REQUIRED = _required()

#: Thresholds two rule modules share: the data-sheet margin, and the size below which a GPU
#: matmul may still sit at the dispatch floor (a float32 n = 2048 matmul is 17 GFLOP: >= 208 µs
#: even at the 82.6 TFLOP/s of an RTX 4090, 3x an eager dispatch of 50-80 µs).
PEAK_MARGIN = 1.05
KERNEL_N = 2048

#: Keys whose numbers are rates; under the NULLABLE ones null means "none" (no ceiling).
RATE_KEYS = ('gflops', 'dtype_gflops', 'bandwidth_gbs', 'gbs', 'speedup')
NULLABLE_KEYS = ('ceiling_gflops', 'ridge_point_flop_per_byte')

_GPU = re.compile(r'GPU:(\d+)')


@dataclass(frozen=True)
class Finding:
    """One check of one notebook, its state (``OK``, ``FAILED``, or ``UNCHECKED``: no data sheet,
    sizes too small to judge, neither a pass nor a failure) and why (Vietnamese)."""

    notebook: str
    check: str
    status: str
    detail: str


def gpu_device(label: Any) -> str | None:
    """``'/GPU:k'`` of a label such as ``'TF /GPU:1'`` or ``'/device:GPU:1'``, else None: the
    one test of "is this a GPU label" in the tools."""
    found = _GPU.search(label) if isinstance(label, str) else None
    return f'/GPU:{found.group(1)}' if found else None


def all_gpus(labels: list[str]) -> bool:
    return bool(labels) and all(map(gpu_device, labels))


def number(x: Any) -> bool:
    """A finite int or float (not a bool) that is > 0: what a timing or a rate must be."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0


def sizes(points: dict[str, Any]) -> list[tuple[int, float]]:
    """``{'16': v, ...}`` as ``[(16, v), ...]`` sorted by size, good values only (the
    finite-number check reports the others)."""
    return sorted((int(k), float(v)) for k, v in points.items() if number(v))


def strings(value: Any) -> list[str]:
    """Every string inside ``value`` (dict values, list items), in order."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    return [s for v in value for s in strings(v)] if isinstance(value, list) else []


def tflops(gflops: float) -> str:
    return f'{gflops / 1e3:.1f} TFLOP/s'


def measurements(
    results: Any, path: str = '', kind: str | None = None
) -> Iterator[tuple[str, Any]]:
    """(key path, value) of every timing (a key ending in ``_s``, except the spread ``iqr_s``)
    and rate (``RATE_KEYS``, ``..._over_...``) in a notebook's results, however deep; a null
    under a ``NULLABLE_KEYS`` key (no ceiling) is left out."""
    if isinstance(results, (dict, list)):
        items = results.items() if isinstance(results, dict) else enumerate(results)
        for k, v in items:
            where = f'{path}[{k}]' if isinstance(results, list) else f'{path}.{k}'.lstrip('.')
            yield from measurements(v, where, kind or _kind(str(k)))
    elif kind == 'measured' or (kind == 'nullable' and results is not None):
        yield path, results


def _kind(key: str) -> str | None:
    if key in NULLABLE_KEYS:
        return 'nullable'
    if key in RATE_KEYS or '_over_' in key or (key.endswith('_s') and key != 'iqr_s'):
        return 'measured'
    return None


class Checker:
    """A run being checked: its findings, a notebook's results, and the GPU behind a label."""

    def __init__(self, run: dict[str, Any]):
        self.run = run
        self.machine = run.get('machine') or {}
        self.findings: list[Finding] = []

    def add(self, notebook: str, check: str, ok: bool, detail: str) -> None:
        self.findings.append(Finding(notebook, check, OK if ok else FAILED, detail))

    def skip(self, notebook: str, check: str, detail: str) -> None:
        self.findings.append(Finding(notebook, check, UNCHECKED, detail))

    def results(self, notebook: str, *keys: str) -> dict[str, Any]:
        """The notebook's results when it ran and saved every one of ``keys``; else ``{}``
        (the missing notebook or key is a failure of its own: ``required_keys``)."""
        results = (self.run.get('notebooks', {}).get(notebook) or {}).get('results') or {}
        return results if all(k in results for k in keys) else {}

    def gpu_name(self, label: str) -> str | None:
        """The model name of the GPU a label's ``/GPU:k`` is, from ``machine.gpus``; for a
        logical device the environment did not list, the one model of the machine."""
        rows = [g for g in self.machine.get('gpus') or [] if isinstance(g, dict)]
        for g in rows:
            if g.get('device') == gpu_device(label):
                return g.get('name')
        names = {g.get('name') for g in rows}
        return names.pop() if len(names) == 1 else None

    def spec(self, notebook: str, check: str, label: str) -> GPUSpec | None:
        """The data-sheet row of a label's GPU; without one, the check is unchecked."""
        name = self.gpu_name(label)
        spec = find_spec(name)
        if spec is None:
            if name is None:
                why = f'không biết {gpu_device(label)} là GPU nào (machine.gpus)'
            elif re.search(r'\bMIG\b', name):
                why = f'{name!r} là một lát MIG, chỉ một phần GPU: không so được với data sheet'
            else:
                why = f'không có hàng data sheet cho {name!r}'
            self.skip(notebook, check, f'{label}: {why}')
        return spec


def check_run(run: dict[str, Any]) -> list[Finding]:
    """Every finding of every check on ``run`` (a dict in the schema of d2lhelpers/runs)."""
    from . import order, presence, sheet

    checker = Checker(run)
    for rule in (*presence.RULES, *sheet.RULES, *order.RULES):
        try:
            rule(checker)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as e:
            checker.add('-', RULE_ERROR, False, f'{rule.__name__}: {type(e).__name__}: {e}')
    return checker.findings


def failed(findings: list[Finding]) -> list[Finding]:
    """The findings that fail the run (not the unchecked ones)."""
    return [f for f in findings if f.status == FAILED]


def summary(findings: list[Finding]) -> str:
    """``'42 kiểm tra: 39 đạt, 1 hỏng, 2 chưa kiểm'``."""
    count = {s: sum(f.status == s for f in findings) for s in (OK, FAILED, UNCHECKED)}
    return (
        f'{len(findings)} kiểm tra: {count[OK]} đạt, {count[FAILED]} hỏng, '
        f'{count[UNCHECKED]} chưa kiểm'
    )


def table(findings: list[Finding]) -> str:
    """The findings as a plain-text table (notebook, check, ok / HỎNG / chưa kiểm, detail) and
    a last line counting each state."""
    rows = [('notebook', 'kiểm tra', 'kết quả', 'chi tiết')]
    rows += [(f.notebook, f.check, f.status, f.detail) for f in findings]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = [
        '  '.join(cell.ljust(w) for cell, w in zip(r[:3], widths, strict=True)) + '  ' + r[3]
        for r in rows
    ]
    return '\n'.join([*lines, f'tổng: {summary(findings)}'])
