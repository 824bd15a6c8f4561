"""The GPU acceptance checks: pure functions over a run (``d2lhelpers/runs/*.json``, schema 1).

Every threshold follows from physics or from the data-sheet row
(``d2lhelpers.datasheets.find_spec``) of the GPU that produced the figure, never from one
machine's numbers. A figure labelled with ``/GPU:k`` (``'TF /GPU:0'`` too) is judged by the row
of ``machine.gpus[...]`` whose ``device`` is ``/GPU:k`` (mixed-model hosts); runs recorded before
``machine.gpus`` existed use ``machine.gpu``. A GPU without a row (a MIG slice, a name not in
DATASHEETS) makes its data-sheet checks *chưa kiểm* (unchecked): counted, never a pass, and not
a failure of the run.

* ``trạng thái``: every notebook ended ``ok``. ``có notebook`` / ``khóa kết quả``: a run of the
  current notebooks (``collection_version == d2lhelpers.__version__``) has every notebook and
  every key of ``REQUIRED``; older runs skip what they lack.
* ``kiểm thử gpu``: ``pytest -m gpu`` ran (``gpu_tests`` not null), >= 1 test passed, none
  failed, errored or was skipped (a skipped GPU test is a GPU that was not tested).
* ``có GPU``: the run measured a GPU: ``machine.gpus`` is not empty, exercise 1 and choose-a-gpu
  have GPU rows (``gflops``; ``bandwidth_gbs``, ``dtype_gflops``), and every device that
  exercises 2-4, data-parallel and use-gpu placed work on is a GPU (use-gpu: at least two).
  A run on a machine without a GPU fails exactly this check and ``kiểm thử gpu``
  (``NO_GPU_CHECKS``): every other rule is about GPU figures and adds nothing without them.
* ``float32 ≤ đỉnh FP32``: every float32 GFLOP/s of a GPU (all sizes) <= 1.05 x the FP32 row:
  above it the matmul ran on TF32, or the clock stopped before the GPU finished (an
  unsynchronised 8192 matmul reads as ~30 PFLOP/s). The same bound on the work of exercise 4
  (2 matmuls, 4n^3 FLOP) and of a data-parallel step (6 x parameters x batch FLOP) over their
  times. A ``tf32: true`` where float32 is claimed fails too (ex1, ex3, ex4, choose-a-gpu,
  data-parallel).
* ``float32 ≥ 20% đỉnh FP32``: at the largest n of a float32 row, when n >= 2048, the GFLOP/s
  is at least 20% of the FP32 row. Healthy runs measure ~51% (H200, n = 8192, TF32 off) to
  ~55% (T4); 20% leaves a 2.5x margin for hosts and cuBLAS versions and still rejects a GPU held
  at low clocks (idle clocks are ~10-20% of boost) or a figure 10x off. Smaller n: unchecked.
* ``TF32 nhanh hơn float32``: with R = TF32 / FP32 of the GPU's row: R > 1.1 (data-centre parts,
  2x for L4 to 8x for A100) needs a measured gain >= 1 + 0.25 (R - 1) (L4 1.25x, H100 2.6x, A100
  2.75x): a gain near 1 means both rows timed the same mode. R <= 1.1 (GeForce: dense TF32 =
  FP32) needs only >= 0.9x. A row without TF32 (T4, V100): not judged.
* ``băng thông so với data sheet``: 50-100% of the row. Above 100% is impossible (1 GiB arrays
  are far larger than any L2); HBM reaches 80-90%, GDDR6 with ECC 70-80%.
* ``không ở mức sàn`` (ex1) / ``trần không ở mức sàn`` (choose-a-gpu): when a GPU row reaches
  n >= 2048 (a float32 matmul of 17 GFLOP: >= 208 µs even at the 82.6 TFLOP/s of an RTX 4090,
  3x an eager dispatch of 50-80 µs), its largest-n time is >= 1.5x the dispatch floor
  ``floor_s``, its time grows >= 1.5x when the work grows >= 8x between the two largest sizes
  (and >= 100x overall), and choose-a-gpu names a ceiling. A run without ``floor_s`` (old
  notebooks) is judged by the growth alone; a row ending below n = 2048 is unchecked.
* ``thứ tự thời gian`` (GPU runs): more work on the same device is not faster than less,
  within a tolerance of 0.8x: exercise 2 via host (two copies over PCIe and a wait) vs on the
  device vs the one-write floor; exercise 3 (a) copy every step vs (b) copy once, the graph with
  its log vs without, (b) vs the eager loop without log; data-parallel steps and forward passes
  vs their floors.
* ``số đo hữu hạn, > 0``: every timing (keys ending in ``_s``: ``median_s``, ``floor_s``,
  ``step_time_s``, ``step_floor_s``, ``model_parallel_s``...) and every rate (``gflops``,
  ``dtype_gflops``, ``bandwidth_gbs``, ``speedup``, ``..._over_...``) of every notebook is a
  finite number > 0 (``save_results`` writes NaN and infinity as null; ``ceiling_gflops`` and
  ``ridge_point_flop_per_byte`` may be null: no ceiling).
* equalities true (``logs_equal``, ``restored_equal``, ``workers_equal``, ``sums_equal``,
  ``weights_match``), ``max_abs_weight_diff`` < 1e-5 (float32 rounding of the same kernels is
  1e-7..1e-6); ``cùng jit_compile`` on both sides of data-parallel.
* ``tăng tốc bài 4`` (GPU runs): two logical devices of ONE GPU: 0.85-1.10x (one chip; only wave
  tails can overlap); separate GPUs: <= 1.05 x the number of devices, and, when they are the same
  model, >= 0.8x (each matmul has its own GPU and its inputs are copied before the clock starts:
  slower than one GPU doing both means the devices interfere).
* ``điểm giao``: exercise 1's crossover agrees with its medians: from ``crossover_n`` on, the
  fastest GPU beats the fastest CPU beyond the tie band at every common size (a crossover inside
  the GPU's floor zone is the real crossover of eager code: the floor sets it).
"""

from __future__ import annotations

import importlib
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from d2lhelpers.datasheets import GPUSpec, find_spec
from d2lhelpers.timing import TIE_BAND, format_seconds

PEAK_MARGIN = 1.05
FP32_FLOOR = 0.20
KERNEL_N = 2048
TF32_SHARE = 0.25
TF32_FLAT = 1.1
TF32_FLAT_MIN = 0.9
BANDWIDTH_RANGE = (0.5, 1.0)
NEAR_FLOOR = 1.5
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
    if isinstance(floor, dict):
        floor = floor.get('matmul')
    return float(floor) if _number(floor) and floor > 0 else None


class _Checker:
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

    # -- the GPU behind a label ------------------------------------------------------------

    def gpu_name(self, label: str) -> str | None:
        """The model name of the GPU a label's ``/GPU:k`` is, from ``machine.gpus``."""
        gpus = self.machine.get('gpus')
        if not isinstance(gpus, list):  # runs before schema 1: one model, machine.gpu
            return self.machine.get('gpu')
        device = gpu_device(label)
        rows = [g for g in gpus if isinstance(g, dict)]
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

    # -- the checks ------------------------------------------------------------------------

    def status(self) -> None:
        for name, entry in self.run.get('notebooks', {}).items():
            status = entry.get('status')
            self.add(name, STATUS, status == 'ok', f'status {status!r}')

    def required_keys(self) -> None:
        if not self.current:
            return
        for name, keys in REQUIRED.items():
            results = self.results(name)
            if results is None:
                self.add(name, HAS_NOTEBOOK, False, 'lần chạy không có notebook này')
                continue
            for key in keys:
                self.has(name, KEYS, results, key)

    def gpu_tests(self) -> None:
        if 'gpu_tests' not in self.run and not self.current:
            return
        tests = self.run.get('gpu_tests')
        if tests is None:
            self.add('-', GPU_TESTS, False, 'gpu_tests = null: pytest -m gpu chưa chạy')
            return
        counts = {k: _dict(tests).get(k) for k in ('passed', 'failed', 'skipped', 'errors')}
        if not all(_count(v) for v in counts.values()):
            self.add('-', GPU_TESTS, False, f'gpu_tests không hợp lệ: {tests!r}')
            return
        problems = []
        if counts['failed'] or counts['errors']:
            problems.append(f'{counts["failed"]} hỏng, {counts["errors"]} lỗi')
        if counts['skipped']:
            problems.append(f'{counts["skipped"]} bị bỏ qua (bỏ qua không phải là đạt)')
        if counts['passed'] < 1:
            problems.append('không kiểm thử nào đạt')
        text = ', '.join(f'{v} {k}' for k, v in counts.items())
        self.add(
            '-',
            GPU_TESTS,
            not problems,
            f'pytest -m gpu: {text}' + (f': {"; ".join(problems)}' if problems else ''),
        )

    def gpu_present(self) -> None:
        gpus = self.machine.get('gpus')
        if isinstance(gpus, list) or self.current:
            names = [g.get('name') for g in gpus or [] if isinstance(g, dict)]
            self.add(
                '-',
                HAS_GPU,
                bool(names),
                f'machine.gpus: {len(names)} GPU ({", ".join(map(str, names))})'
                if names
                else 'lần chạy không đo GPU nào: machine.gpus rỗng (TensorFlow không thấy GPU)',
            )
        else:
            gpu = self.machine.get('gpu')
            self.add('-', HAS_GPU, bool(gpu), f'machine.gpu = {gpu!r}')
        for name, keys in (
            (EX1, ('gflops',)),
            (CHOOSE, ('gflops', 'bandwidth_gbs', 'dtype_gflops')),
        ):
            results = self.results(name)
            tables = {k: results[k] for k in keys if results and isinstance(results.get(k), dict)}
            if not tables:
                continue
            missing = {k: list(t) for k, t in tables.items() if not _gpu_devices(t)}
            found = sorted({d for t in tables.values() for d in _gpu_devices(t)})
            what = 'thiếu hàng GPU' if found else 'lần chạy không đo GPU nào'
            self.add(
                name,
                HAS_GPU,
                not missing,
                f'{what}: ' + '; '.join(f'{k} chỉ có {v}' for k, v in missing.items())
                if missing
                else f'có số đo của {", ".join(found)}',
            )
        for name, keys, least in (
            (EX2, ('devices',), 1),
            (EX3, ('device',), 1),
            (EX4, ('devices',), 1),
            (DP, ('devices',), 1),
            (USE, PLACEMENT_KEYS, 2),
        ):
            results = self.results(name) or {}
            where = {k: _strings(results[k]) for k in keys if k in results}
            if not where:
                continue
            devices = [d for ds in where.values() for d in ds]
            others = sorted({d for d in devices if not gpu_device(d)})
            used = sorted({gpu_device(d) for d in devices if gpu_device(d)})
            shown = ', '.join(f'{k} = {results[k]!r}' for k in where)
            if not used:
                detail = f'lần chạy không đo GPU nào: {shown}'
            elif others:
                detail = f'không phải GPU: {", ".join(others)} ({shown})'
            elif len(used) < least:
                detail = f'chỉ dùng {", ".join(used)}, cần ít nhất {least} GPU ({shown})'
            else:
                detail = f'mọi vị trí là GPU: {", ".join(used)}'
            self.add(name, HAS_GPU, bool(used) and not others and len(used) >= least, detail)

    def dtype_n(self) -> int:
        """n of choose-a-gpu's dtype matmuls: its parameter, 8192 on a GPU by default; 0 when
        unknown (old runs)."""
        params = (self.run.get('notebooks', {}).get(CHOOSE) or {}).get('parameters') or {}
        n = params.get('dtype_size', 'auto')
        if isinstance(n, int) and not isinstance(n, bool):
            return n
        return 8192 if self.current and n == 'auto' else 0

    def float32_rows(self) -> Iterator[tuple[str, str, list[tuple[int, float]]]]:
        """(notebook, label, [(n, GFLOP/s)]) of every GPU figure claimed to be float32; n = 0:
        size unknown."""
        for name in (EX1, CHOOSE):
            results = self.results(name) or {}
            for dev in _gpu_devices(results.get('gflops')):
                yield name, f'gflops[{dev!r}]', _sizes(_dict(results['gflops'][dev]))
        results = self.results(CHOOSE) or {}
        for dev in _gpu_devices(results.get('dtype_gflops')):
            row = _dict(results['dtype_gflops'][dev]).get('float32')
            if isinstance(row, dict):
                yield CHOOSE, f'dtype_gflops[{dev!r}].float32', _sizes(row)
            elif _number(row):
                yield CHOOSE, f'dtype_gflops[{dev!r}].float32', [(self.dtype_n(), float(row))]

    def ex4_split(self, results: dict[str, Any]) -> bool:
        """Whether exercise 4 ran on logical devices of one GPU (inferred for old runs)."""
        if results.get('split') is not None:
            return bool(results['split'])
        devices = list(results.get('devices') or [])
        return self.machine.get('gpu_count') == 1 and devices == ['/GPU:0', '/GPU:1']

    def timed_work(self) -> Iterator[tuple[str, str, float, float, list[str]]]:
        """(notebook, what, FLOP, seconds, GPUs doing it) of exercise 4 and data-parallel."""
        results = self.results(EX4) or {}
        devices, times, n = _strings(results.get('devices')), _dict(results.get('median_s')), 0
        if _number(results.get('n')):
            n = int(results['n'])
        if n and len(devices) >= 2 and all(map(gpu_device, devices)):
            apart = devices[:1] if self.ex4_split(results) else devices[:2]
            for key, on in (('sequential', devices[:1]), ('concurrent', apart)):
                if _number(times.get(key)) and times[key] > 0:
                    yield EX4, f'median_s.{key} (2 phép nhân n = {n})', 4 * n**3, times[key], on
        results = self.results(DP) or {}
        devices, flop = _strings(results.get('devices')), results.get('step_flops')
        if _number(flop) and devices and all(map(gpu_device, devices)):
            for key, t in _dict(results.get('step_time_s')).items():
                if str(key).isdigit() and _number(t) and t > 0:
                    k = int(key)
                    on = devices[:1] if results.get('split', True) else devices[:k]
                    yield DP, f'step_time_s.{key} ({k} replica)', flop, t, on

    def fp32_peak(self) -> None:
        for name in (EX1, EX3, EX4, CHOOSE, DP):
            results = self.results(name)
            if results is not None and results.get('tf32') is True:
                self.add(name, FP32_PEAK, False, 'tf32 = true trong khi kết quả ghi là float32')
        for name, label, points in self.float32_rows():
            spec = self.spec(label)
            if spec is None:
                self.no_sheet(name, FP32_PEAK, label)
                continue
            limit = spec.fp32_tflops * 1e3 * PEAK_MARGIN
            over = [(n, g) for n, g in points if g > limit]
            where = ', '.join(f'n = {n}: {_tflops(g)}' if n else _tflops(g) for n, g in over)
            self.add(
                name,
                FP32_PEAK,
                not over,
                f'{label}: {where} > {spec.fp32_tflops:g} TFLOP/s (FP32 {spec.name}, '
                'data sheet): TF32 ghi là float32, hoặc đồng hồ dừng trước khi GPU xong'
                if over
                else f'{label}: mọi điểm ≤ {spec.fp32_tflops:g} TFLOP/s x{PEAK_MARGIN} '
                f'(FP32 {spec.name}, data sheet)',
            )
        for name, what, flop, seconds, on in self.timed_work():
            specs = {d: self.spec(d) for d in on}
            if None in specs.values():
                self.no_sheet(name, FP32_PEAK, next(d for d, s in specs.items() if s is None))
                continue
            specs = list(specs.values())
            peak = sum(s.fp32_tflops for s in specs) * 1e3
            rate = flop / seconds / 1e9
            self.add(
                name,
                FP32_PEAK,
                rate <= peak * PEAK_MARGIN,
                f'{what}: {flop / 1e9:.0f} GFLOP trong {format_seconds(seconds)} = '
                f'{_tflops(rate)} (cần ≤ {peak / 1e3:g} TFLOP/s x{PEAK_MARGIN}, FP32 '
                f'{" + ".join(s.name for s in specs)}, data sheet)',
            )

    def fp32_floor(self) -> None:
        for name, label, points in self.float32_rows():
            if not points:
                continue
            spec = self.spec(label)
            if spec is None:
                self.no_sheet(name, FP32_LOW, label)
                continue
            n, gflops = points[-1]
            if n < KERNEL_N:
                size = f'n lớn nhất {n} < {KERNEL_N}' if n else 'không biết n của phép đo'
                self.skip(name, FP32_LOW, f'{label}: {size}: chưa so được với đỉnh')
                continue
            frac = gflops / (spec.fp32_tflops * 1e3)
            self.add(
                name,
                FP32_LOW,
                frac >= FP32_FLOOR,
                f'{label}: n = {n}: {_tflops(gflops)} = {frac:.0%} của {spec.fp32_tflops:g} '
                f'TFLOP/s (FP32 {spec.name}, data sheet; cần ≥ {FP32_FLOOR:.0%}: thấp hơn là GPU '
                'chạy ở xung nhịp thấp hoặc phép đo sai)',
            )

    def tf32_gain(self) -> None:
        results = self.results(CHOOSE) or {}
        for dev in _gpu_devices(results.get('dtype_gflops')):
            spec = self.spec(dev)
            if spec is None:
                self.no_sheet(CHOOSE, TF32_GAIN, dev)
                continue
            if not spec.tf32_tflops:
                continue  # no TF32 on this GPU (T4, V100)
            rows = _dict(results['dtype_gflops'][dev])
            tf32, fp32 = rows.get('tf32'), rows.get('float32')
            if tf32 is None or fp32 is None:
                if self.current:
                    self.add(
                        CHOOSE,
                        TF32_GAIN,
                        False,
                        f'{dev}: không có số đo {"tf32" if tf32 is None else "float32"}, '
                        f'dù {spec.name} có TF32 ({spec.tf32_tflops:g} TFLOP/s, data sheet)',
                    )
                continue
            at = ''
            if isinstance(tf32, dict) and isinstance(fp32, dict):
                common = sorted(set(dict(_sizes(tf32))) & set(dict(_sizes(fp32))))
                if not common:
                    self.add(CHOOSE, TF32_GAIN, False, f'{dev}: float32 và tf32 không có n chung')
                    continue
                n = common[-1]
                tf32, fp32, at = dict(_sizes(tf32))[n], dict(_sizes(fp32))[n], f' ở n = {n}'
            if not (_number(tf32) and _number(fp32)):
                continue  # not numbers: the finite-number check reports them
            ratio = spec.tf32_tflops / spec.fp32_tflops
            need = 1 + TF32_SHARE * (ratio - 1) if ratio > TF32_FLAT else TF32_FLAT_MIN
            gain = tf32 / fp32 if fp32 > 0 else math.inf
            self.add(
                CHOOSE,
                TF32_GAIN,
                gain >= need,
                f'{dev}: tf32 / float32 = {gain:.2f}x{at}; {spec.name}: TF32 / FP32 = '
                f'{ratio:.2f}x (data sheet), cần ≥ {need:.2f}x',
            )

    def bandwidth(self) -> None:
        results = self.results(CHOOSE) or {}
        table = results.get('bandwidth_gbs')
        for dev in _gpu_devices(table):
            spec = self.spec(dev)
            if spec is None:
                self.no_sheet(CHOOSE, BANDWIDTH, dev)
                continue
            value = table[dev]
            if not _number(value):
                continue  # the finite-number check reports it
            frac = value / spec.bandwidth_gbs
            lo, hi = BANDWIDTH_RANGE
            self.add(
                CHOOSE,
                BANDWIDTH,
                lo <= frac <= hi,
                f'{dev}: {value:.1f} GB/s = {frac:.0%} của {spec.bandwidth_gbs:g} GB/s '
                f'({spec.name}, data sheet; cần {lo:.0%}-{hi:.0%})',
            )

    def _matmul_times(self, name: str, dev: str) -> list[tuple[int, float]]:
        results = self.results(name) or {}
        if dev in (results.get('median_s') or {}):
            return _sizes(_dict(results['median_s'][dev]))
        points = _sizes(_dict(_dict(results.get('gflops')).get(dev)))
        return [(n, matmul_seconds(n, g)) for n, g in points if g > 0]

    def off_floor(self, name: str, check: str, dev: str, floor: float | None) -> None:
        """A GPU row that reaches n >= KERNEL_N: its largest point clear of the floor, its time
        growing with the work (see the module docstring)."""
        times = self._matmul_times(name, dev)
        if not times:
            return
        n, t = times[-1]
        if floor is None:  # old notebooks: the growth of the time alone
            why = scaling_verdict(times)
            self.add(
                name,
                check,
                why is None,
                f'{dev}: {why}' if why else f'{dev}: thời gian tăng theo khối lượng tính',
            )
            return
        if n < KERNEL_N:
            self.skip(name, check, f'{dev}: n lớn nhất {n} < {KERNEL_N}: GPU có thể còn ở mức sàn')
            return
        problems = []
        ceilings = (self.results(name) or {}).get('ceiling_gflops')
        if name == CHOOSE and isinstance(ceilings, dict) and ceilings.get(dev) is None:
            problems.append('không có trần: notebook thấy mọi điểm GPU ở mức sàn')
        if t < NEAR_FLOOR * floor:
            problems.append(
                f'n = {n} mất {format_seconds(t)} = {t / floor:.2f}x mức sàn '
                f'{format_seconds(floor)} (cần ≥ {NEAR_FLOOR}x): phép đo không chờ GPU, hoặc '
                'không đo phép nhân'
            )
        why = scaling_verdict(times)
        if why:
            problems.append(why)
        self.add(
            name,
            check,
            not problems,
            f'{dev}: ' + '; '.join(problems)
            if problems
            else f'{dev}: n = {n} mất {format_seconds(t)} = {t / floor:.2f}x mức sàn '
            f'{format_seconds(floor)}; thời gian tăng theo khối lượng tính',
        )

    def dispatch(self, name: str, check: str) -> None:
        """``off_floor`` for every GPU row of ``name``; without ``floor_s`` (old notebooks) by
        the growth of the time alone."""
        results = self.results(name)
        if results is None:
            return
        for dev in _gpu_devices(results.get('gflops')):
            if 'floor_s' in results:
                floor = _floor_of(_dict(results['floor_s']).get(dev))
                if floor is None:
                    self.add(name, check, False, f'{dev}: không có floor_s hợp lệ')
                    continue
            elif self.current:
                continue  # the missing key is a failure of its own (khóa kết quả)
            else:
                floor = None
            self.off_floor(name, check, dev, floor)

    def dispatch_ex1(self) -> None:
        self.dispatch(EX1, OFF_FLOOR)

    def dispatch_choose(self) -> None:
        self.dispatch(CHOOSE, CEILING)

    def more_work(self, name: str, more: str, t_more: Any, less: str, t_less: Any, why: str):
        if not (_number(t_more) and _number(t_less)) or t_less <= 0:
            return
        x = t_more / t_less
        self.add(
            name,
            ORDER,
            x >= MORE_WORK_MIN,
            f'{more} {format_seconds(t_more)} = {x:.2f}x {less} {format_seconds(t_less)} '
            f'(cần ≥ {MORE_WORK_MIN}x: {why})',
        )

    def timing_order(self) -> None:
        results = self.results(EX2) or {}
        devices = _strings(results.get('devices'))
        times = results.get('median_s') or {}
        if devices and all(map(gpu_device, devices)) and isinstance(times, dict):
            self.more_work(
                EX2,
                'qua host',
                times.get('via_host'),
                'trên thiết bị',
                times.get('on_device'),
                'qua host thêm hai lần chép qua PCIe và một lần chờ GPU',
            )
            self.more_work(
                EX2,
                'trên thiết bị',
                times.get('on_device'),
                'mức sàn',
                times.get('floor'),
                'ghi mọi tham số nhiều việc hơn cùng số phép ghi trên biến vô hướng',
            )
        results = self.results(EX3) or {}
        times = results.get('median_s') or {}
        if gpu_device(results.get('device')) and isinstance(times, dict):
            for more, less, why in (
                ('host_every_step', 'device_once', '(a) thêm một lần chép và một lần chờ mỗi bước'),
                ('tf_function', 'no_logging', 'cùng vòng lặp trong đồ thị, thêm ghi log'),
                ('device_once', 'eager_no_logging', 'cùng các phép nhân eager, thêm tính chuẩn'),
            ):
                self.more_work(EX3, more, times.get(more), less, times.get(less), why)
        results = self.results(DP) or {}
        devices = _strings(results.get('devices'))
        if devices and all(map(gpu_device, devices)):
            steps, floors = results.get('step_time_s') or {}, results.get('step_floor_s') or {}
            for key, t in steps.items() if isinstance(steps, dict) else ():
                why = 'cùng bước huấn luyện, mạng rộng so với mạng một nơ-ron'
                label = f'step_time_s.{key}'
                self.more_work(DP, label, t, f'step_floor_s.{key}', floors.get(key), why)
            mp = results.get('model_parallel_s') or {}
            for key, pair in mp.items() if isinstance(mp, dict) else ():
                if isinstance(pair, list) and len(pair) == 2:
                    why = 'lượt xuôi thật so với hàm gần như không tính gì'
                    label = f'model_parallel_s.{key}'
                    self.more_work(DP, f'{label}[0]', pair[0], f'{label}[1]', pair[1], why)

    def finite(self) -> None:
        for name in self.run.get('notebooks', {}):
            values = list(measurements(self.results(name) or {}))
            if not values:
                continue
            bad = [
                f'{path} = {"null (NaN hoặc vô cực khi lưu)" if v is None else repr(v)}'
                for path, v in values
                if not (_number(v) and v > 0)
            ]
            self.add(
                name,
                FINITE,
                not bad,
                'không hữu hạn hoặc ≤ 0: ' + ', '.join(bad[:5]) + (' ...' if len(bad) > 5 else '')
                if bad
                else f'{len(values)} số đo thời gian và tốc độ đều hữu hạn, > 0',
            )

    def equalities(self) -> None:
        for name in self.run.get('notebooks', {}):
            results = self.results(name) or {}
            for key in EQUALITY_KEYS:
                if key in results:
                    value = results[key]
                    self.add(name, key, value is True, f'{key} = {value!r}')
            if 'max_abs_weight_diff' in results:
                diffs = results['max_abs_weight_diff']
                items = diffs.items() if isinstance(diffs, dict) else [('', diffs)]
                for label, value in items:
                    ok = _number(value) and value < MAX_WEIGHT_DIFF
                    self.add(
                        name,
                        WEIGHT_DIFF,
                        ok,
                        f'{label or "trọng số"}: {value!r} (cần < {MAX_WEIGHT_DIFF:g})',
                    )

    def jit_compile(self) -> None:
        results = self.results(DP) or {}
        jit = results.get('jit_compile')
        if isinstance(jit, dict) and {'single', 'mirrored'} <= jit.keys():
            self.add(
                DP,
                SAME_JIT,
                jit['single'] == jit['mirrored'],
                f'jit_compile một thiết bị {jit["single"]!r}, MirroredStrategy {jit["mirrored"]!r}',
            )

    def split_gpu(self) -> None:
        results = self.results(EX4)
        if results is None or not _number(results.get('speedup')):
            return
        speedup = results['speedup']
        devices = _strings(results.get('devices'))
        if not devices or not all(map(gpu_device, devices)):
            return  # no GPU: the GPU presence check says so
        if self.ex4_split(results):
            lo, hi = SPLIT_RANGE
            self.add(
                EX4,
                SPEEDUP,
                lo <= speedup <= hi,
                f'{speedup:.2f}x trên hai thiết bị logic của MỘT GPU (cần {lo}-{hi}x: chung '
                'một GPU thì không thể nhanh hơn)',
            )
            return
        names = {self.gpu_name(d) for d in devices}
        same = len(names) == 1 and None not in names
        low = speedup >= SEPARATE_MIN if same else speedup > 0
        why = (
            f'cùng loại {names.pop()}: cần ≥ {SEPARATE_MIN}x, chậm hơn là hai GPU cản nhau'
            if same
            else 'khác loại: không có cận dưới'
        )
        self.add(
            EX4,
            SPEEDUP,
            low and speedup <= len(devices) * PEAK_MARGIN,
            f'{speedup:.2f}x trên {len(devices)} GPU riêng (không thể vượt {len(devices)}x; {why})',
        )

    def crossover(self) -> None:
        """Exercise 1's crossover agrees with its own medians: from ``crossover_n`` on, the fastest
        GPU beats the fastest CPU by more than the tie band at every common size (a crossover
        inside the GPU's floor zone is the real crossover of eager code: the floor sets it)."""
        results = self.results(EX1)
        if results is None or results.get('crossover_n') is None:
            return
        n = results['crossover_n']
        times = {d: dict(self._matmul_times(EX1, d)) for d in results.get('median_s') or {}}
        gpus = [t for d, t in times.items() if 'GPU' in d]
        cpus = [t for d, t in times.items() if 'GPU' not in d]
        common = sorted(set.intersection(*(set(t) for t in gpus + cpus))) if gpus and cpus else []
        if n not in common:
            self.add(EX1, CROSSOVER, False, f'crossover_n = {n} không phải một n đã đo trên cả hai')
            return
        lost = [
            m
            for m in common
            if m >= n and min(t[m] for t in gpus) * TIE_BAND >= min(t[m] for t in cpus)
        ]
        self.add(
            EX1,
            CROSSOVER,
            not lost,
            f'crossover_n = {n}, nhưng ở n = {lost} GPU nhanh nhất không thắng CPU nhanh nhất '
            f'quá dải hòa {TIE_BAND}x'
            if lost
            else f'crossover_n = {n}: từ đó GPU thắng CPU ở mọi n đã đo (quá dải hòa {TIE_BAND}x)',
        )


CHECKS: tuple[Callable[[_Checker], None], ...] = (
    _Checker.status,
    _Checker.required_keys,
    _Checker.gpu_tests,
    _Checker.gpu_present,
    _Checker.fp32_peak,
    _Checker.fp32_floor,
    _Checker.tf32_gain,
    _Checker.bandwidth,
    _Checker.dispatch_ex1,
    _Checker.dispatch_choose,
    _Checker.timing_order,
    _Checker.finite,
    _Checker.equalities,
    _Checker.jit_compile,
    _Checker.split_gpu,
    _Checker.crossover,
)


def check_run(run: dict[str, Any]) -> list[Finding]:
    """Every finding of every check on ``run`` (a dict in the schema of d2lhelpers/runs)."""
    checker = _Checker(run)
    for check in CHECKS:
        check(checker)
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
