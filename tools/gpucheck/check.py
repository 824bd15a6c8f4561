"""The GPU acceptance checks: pure functions over a run (``d2lhelpers/runs/*.json``, schema 1).

This module holds the names (notebooks, checks, thresholds, ``REQUIRED``), a ``Finding``, the
``Checker`` a rule adds findings to, and ``check_run``; the rules live by what they check:
``presence`` (what the run holds), ``sheet`` (figures against the GPU's data sheet), ``order``
(figures against each other). Every threshold follows from physics or from the data-sheet row
(``d2lhelpers.datasheets.find_spec``) of the GPU that produced the figure, never from one
machine's numbers. A figure labelled ``/GPU:k`` is judged by the row of ``machine.gpus`` whose
``device`` is ``/GPU:k``. A GPU without a row (a MIG slice, a name not in DATASHEETS) makes its
data-sheet checks *chưa kiểm* (unchecked): counted, never a pass, and not a failure. A run
without any GPU fails exactly ``NO_GPU_CHECKS``. Runs of an older ``collection_version`` are
not held to ``REQUIRED`` (the stored H200 run of 0.2.0 is judged by what it has).
"""

from __future__ import annotations

import importlib
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from d2lhelpers.datasheets import GPUSpec, find_spec
from d2lhelpers.timing import NEAR_FLOOR

PEAK_MARGIN = 1.05
FP32_FLOOR = 0.20
KERNEL_N = 2048
TF32_SHARE = 0.25
TF32_FLAT = 1.1
TF32_FLAT_MIN = 0.9
BANDWIDTH_RANGE = (0.5, 1.0)
SCALING_WORK = 100
STEP_WORK = 8
SPLIT_RANGE = (0.85, 1.10)
SEPARATE_MIN = 0.8
MORE_WORK_MIN = 0.8
MAX_WEIGHT_DIFF = 1e-5
EQUALITY_KEYS = ('logs_equal', 'restored_equal', 'workers_equal', 'sums_equal', 'weights_match')

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
FP32_PEAK = 'float32 ≤ đỉnh FP32'
FP32_LOW = f'float32 ≥ {FP32_FLOOR:.0%} đỉnh FP32'
TF32_GAIN = 'TF32 nhanh hơn float32'
BANDWIDTH = 'băng thông so với data sheet'
OFF_FLOOR = 'không ở mức sàn'
CEILING = 'trần không ở mức sàn'
ORDER = 'thứ tự thời gian'
FINITE = 'số đo hữu hạn, > 0'
SPEEDUP = 'tăng tốc bài 4'
CROSSOVER = 'điểm giao'
SAME_JIT = 'cùng jit_compile'
WEIGHT_DIFF = 'max_abs_weight_diff'

#: What a run without any GPU fails, and nothing else.
NO_GPU_CHECKS = frozenset({HAS_GPU, GPU_TESTS})

#: What the current notebooks save (checked only for runs of the current version).
REQUIRED = {
    EX1: ('gflops', 'median_s', 'crossover_n', 'floor_s', 'near_floor', 'tf32'),
    EX2: ('restored_equal', 'devices', 'median_s', 'floor_s'),
    EX3: ('logs_equal', 'device', 'median_s', 'floor_s', 'tf32'),
    EX4: ('n', 'devices', 'speedup', 'split', 'median_s', 'floor_s', 'sums_equal', 'tf32'),
    CHOOSE: (
        'bandwidth_gbs',
        'gflops',
        'dtype_gflops',
        'ceiling_gflops',
        'floor_s',
        'near_floor',
        'tf32',
    ),
    DP: (
        'max_abs_weight_diff',
        'workers_equal',
        'weights_match',
        'jit_compile',
        'devices',
        'split',
        'tf32',
        'step_time_s',
        'step_floor_s',
        'model_parallel_s',
        'step_flops',
    ),
    USE: ('devices',),
}

#: Results keys whose values are device names (use-gpu: where each tensor/variable landed).
PLACEMENT_KEYS = ('devices', 'placed', 'placements', 'mirrored_copies')
#: Results keys whose numbers are rates; under the NULLABLE ones null means "none" (no ceiling).
RATE_KEYS = ('gflops', 'dtype_gflops', 'bandwidth_gbs', 'gbs', 'speedup')
NULLABLE_KEYS = ('ceiling_gflops', 'ridge_point_flop_per_byte')
#: Keys ending in ``_s`` that are spreads, not durations (may be 0).
SPREAD_KEYS = ('iqr_s',)

_GPU = re.compile(r'GPU:(\d+)')


@dataclass(frozen=True)
class Finding:
    """One check of one notebook and why (Vietnamese): ``ok`` only when it passed; an
    ``unchecked`` finding (no data sheet, sizes too small to judge) is neither ok nor failed."""

    notebook: str
    check: str
    ok: bool
    detail: str
    unchecked: bool = False

    @property
    def status(self) -> str:
        return UNCHECKED if self.unchecked else OK if self.ok else FAILED


def current_version() -> str:
    """``d2lhelpers.__version__``, read now (the version of the notebooks in this checkout)."""
    return importlib.import_module('d2lhelpers').__version__


def is_current(run: dict[str, Any]) -> bool:
    return str(run.get('collection_version')) == str(current_version())


def gpu_device(label: Any) -> str | None:
    """``'/GPU:k'`` of a label such as ``'TF /GPU:1'`` or ``'/device:GPU:1'``, else None."""
    found = _GPU.search(label) if isinstance(label, str) else None
    return f'/GPU:{found.group(1)}' if found else None


def _results(run: dict[str, Any], notebook: str) -> dict[str, Any] | None:
    entry = run.get('notebooks', {}).get(notebook)
    return None if entry is None else entry.get('results') or {}


def _gpu_devices(table: Any) -> list[str]:
    return [d for d in table if gpu_device(d)] if isinstance(table, dict) else []


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _count(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def _dict(x: Any) -> dict[str, Any]:
    return x if isinstance(x, dict) else {}


def _sizes(points: dict[str, Any]) -> list[tuple[int, float]]:
    """``{'16': v, ...}`` as ``[(16, v), ...]`` sorted by size, positive numbers only (the
    finite-number check reports the others)."""
    out = []
    for k, v in points.items():
        try:
            n = int(k)
        except (TypeError, ValueError):
            continue
        if _number(v) and v > 0:
            out.append((n, float(v)))
    return sorted(out)


def _strings(value: Any) -> list[str]:
    """Every string inside ``value`` (dict values, list items), in order."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _strings(v)]
    return []


def _tflops(gflops: float) -> str:
    return f'{gflops / 1e3:.1f} TFLOP/s'


def matmul_seconds(n: int, gflops: float) -> float:
    """Time of one n x n matmul (2 n^3 FLOP) at ``gflops`` GFLOP/s."""
    return 2 * n**3 / (gflops * 1e9)


def scaling_verdict(times: list[tuple[int, float]]) -> str | None:
    """Why matmul times of one device (size, seconds) are dispatch-bound, or None.

    Work of a matmul grows as n^3. On the kernel, the time follows the work; at the dispatch
    floor it stays flat.
    """
    if len(times) < 2:
        return None
    (n0, t0), (n1, t1) = times[0], times[-1]
    work = (n1 / n0) ** 3
    if work >= SCALING_WORK and t1 < NEAR_FLOOR * t0:
        return (
            f'thời gian ở n = {n0} và n = {n1} chỉ khác {t1 / t0:.2f}x trong khi khối lượng '
            f'tính gấp {work:.0f}x: mọi điểm đều ở mức sàn gửi phép toán'
        )
    (n0, t0) = times[-2]
    work = (n1 / n0) ** 3
    if work >= STEP_WORK and t1 < NEAR_FLOOR * t0:
        return (
            f'từ n = {n0} đến n = {n1} thời gian chỉ tăng {t1 / t0:.2f}x trong khi khối lượng '
            f'tính gấp {work:.0f}x: điểm lớn nhất vẫn ở mức sàn gửi phép toán'
        )
    return None


def _is_measured(key: str) -> bool:
    """Whether a results key holds timings or rates (see the module docstring)."""
    if key in RATE_KEYS or '_over_' in key:
        return True
    return key.endswith('_s') and key not in SPREAD_KEYS


def _leaves(value: Any, path: str, nullable: bool) -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, f'{path}.{k}', nullable)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _leaves(v, f'{path}[{i}]', nullable)
    elif not (value is None and nullable):
        yield path, value


def measurements(results: Any, path: str = '') -> Iterator[tuple[str, Any]]:
    """(key path, value) of every timing and rate in a notebook's results; a null under a key
    where it means "none" (``ceiling_gflops``) is left out."""
    if isinstance(results, dict):
        for k, v in results.items():
            key = str(k)
            where = f'{path}.{key}' if path else key
            if key in NULLABLE_KEYS or _is_measured(key):
                yield from _leaves(v, where, key in NULLABLE_KEYS)
            else:
                yield from measurements(v, where)
    elif isinstance(results, list):
        for i, v in enumerate(results):
            yield from measurements(v, f'{path}[{i}]')


def _floor_of(floor: Any) -> float | None:
    return float(floor) if _number(floor) and floor > 0 else None


class Checker:
    """A run being checked: its findings, and the GPU behind a label."""

    def __init__(self, run: dict[str, Any]):
        self.run = run
        self.current = is_current(run)
        self.machine = run.get('machine') or {}
        self.findings: list[Finding] = []

    def add(self, notebook: str, check: str, ok: bool, detail: str) -> None:
        self.findings.append(Finding(notebook, check, bool(ok), detail))

    def skip(self, notebook: str, check: str, detail: str) -> None:
        self.findings.append(Finding(notebook, check, False, detail, unchecked=True))

    def results(self, notebook: str) -> dict[str, Any] | None:
        return _results(self.run, notebook)

    def has(self, notebook: str, check: str, results: dict[str, Any], key: str) -> bool:
        """Whether ``key`` is in ``results``; a missing key fails only for the current version."""
        if key in results:
            return True
        if self.current:
            self.add(notebook, check, False, f'không có khóa {key!r} trong kết quả')
        return False

    def gpu_name(self, label: str) -> str | None:
        """The model name of the GPU a label's ``/GPU:k`` is, from ``machine.gpus``."""
        device = gpu_device(label)
        rows = [g for g in self.machine.get('gpus') or [] if isinstance(g, dict)]
        for g in rows:
            if g.get('device') == device:
                return g.get('name')
        names = {g.get('name') for g in rows}  # a logical device the environment did not list
        return names.pop() if len(names) == 1 else None

    def spec(self, label: str) -> GPUSpec | None:
        return find_spec(self.gpu_name(label))

    def no_sheet(self, notebook: str, check: str, label: str) -> None:
        name = self.gpu_name(label)
        if name is None:
            why = f'không biết {gpu_device(label)} là GPU nào (machine.gpus)'
        elif re.search(r'\bMIG\b', name):
            why = f'{name!r} là một lát MIG, chỉ một phần GPU: không so được với data sheet'
        else:
            why = f'không có hàng data sheet cho {name!r}'
        self.skip(notebook, check, f'{label}: {why}')


def ex4_split(c: Checker, results: dict[str, Any]) -> bool:
    """Whether exercise 4 ran on logical devices of one GPU (inferred for old runs)."""
    if results.get('split') is not None:
        return bool(results['split'])
    devices = list(results.get('devices') or [])
    return c.machine.get('gpu_count') == 1 and devices == ['/GPU:0', '/GPU:1']


def check_run(run: dict[str, Any]) -> list[Finding]:
    """Every finding of every check on ``run`` (a dict in the schema of d2lhelpers/runs)."""
    from . import order, presence, sheet

    checker = Checker(run)
    for rule in (*presence.RULES, *sheet.RULES, *order.RULES):
        rule(checker)
    return checker.findings


def failed(findings: list[Finding]) -> list[Finding]:
    """The findings that fail the run (not the unchecked ones)."""
    return [f for f in findings if f.status == FAILED]


def unchecked(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.status == UNCHECKED]


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
