"""The GPU acceptance checks: pure functions over a reference run (``d2lhelpers/runs/*.json``).

Every check follows from physics or from the running GPU's own data-sheet row
(``d2lhelpers.datasheets.find_spec``), never from one machine's numbers:

* every notebook ended ``ok``;
* no float32 GFLOP/s above the FP32 data-sheet peak (x1.05): above it, the matmul ran on TF32;
  a result ``tf32: true`` where float32 is claimed fails too;
* where TF32 exists (compute capability >= 8.0) and a ``tf32`` row was measured, it is clearly
  faster than float32 (>= 1.5x at the largest size): otherwise the two rows timed the same thing;
* memory bandwidth between 50% and 100% of the data sheet (above 100% is impossible);
* no headline figure at the dispatch floor: with ``floor_s[dev]`` the point used as a ceiling must
  take >= 1.5x the floor; without it (old runs), by scaling: when the time of the smallest and the
  largest size differ by less than 1.5x while the work differs by >= 100x, or the time grows by
  less than 1.5x between the two largest sizes while the work grows >= 8x, the points of that
  device measure a fixed cost, not the kernel, and no ceiling or crossover may come from them;
* equality results true (``logs_equal``, ``restored_equal``, ``workers_equal``, ``sums_equal``,
  ``weights_match``), ``max_abs_weight_diff`` < 1e-5;
* exercise 4 on two logical GPUs of ONE physical GPU: speedup in [0.85, 1.10] (they share one
  GPU); on separate GPUs not above the number of devices;
* exercise 1: the crossover is not a point at the GPU's dispatch floor.

A key the current notebooks save but a run lacks is a failure only when the run is of the current
version of the notebooks (``d2lhelpers.__version__``); older runs skip that check.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from d2lhelpers.datasheets import GPUSpec, find_spec

PEAK_MARGIN = 1.05
TF32_MIN_GAIN = 1.5
BANDWIDTH_RANGE = (0.5, 1.0)
NEAR_FLOOR = 1.5
SCALING_WORK = 100
STEP_WORK = 8
SPLIT_RANGE = (0.85, 1.10)
MAX_WEIGHT_DIFF = 1e-5
EQUALITY_KEYS = ('logs_equal', 'restored_equal', 'workers_equal', 'sums_equal', 'weights_match')

EX1 = 'exercises/01-cpu-vs-gpu-matmul'
EX2 = 'exercises/02-parameters-on-gpu'
EX3 = 'exercises/03-log-on-device'
EX4 = 'exercises/04-two-gpu-matmul'
CHOOSE = 'notebooks/choose-a-gpu'
DP = 'notebooks/data-parallel'

#: What the current notebooks save (checked only for runs of the current version).
REQUIRED = {
    EX1: ('gflops', 'median_s', 'crossover_n', 'floor_s', 'near_floor', 'tf32'),
    EX2: ('restored_equal',),
    EX3: ('logs_equal', 'floor_s', 'tf32'),
    EX4: ('speedup', 'split', 'sums_equal', 'tf32'),
    CHOOSE: (
        'bandwidth_gbs',
        'gflops',
        'dtype_gflops',
        'ceiling_gflops',
        'floor_s',
        'near_floor',
        'tf32',
    ),
    DP: ('max_abs_weight_diff', 'workers_equal', 'weights_match', 'jit_compile'),
}


@dataclass(frozen=True)
class Finding:
    """One check of one notebook: ``ok`` and why (Vietnamese)."""

    notebook: str
    check: str
    ok: bool
    detail: str


def current_version() -> str:
    """``d2lhelpers.__version__``, read now (the version of the notebooks in this checkout)."""
    return importlib.import_module('d2lhelpers').__version__


def is_current(run: dict[str, Any]) -> bool:
    return str(run.get('collection_version')) == str(current_version())


def spec_of(run: dict[str, Any]) -> GPUSpec | None:
    return find_spec(run.get('machine', {}).get('gpu'))


def _results(run: dict[str, Any], notebook: str) -> dict[str, Any] | None:
    entry = run.get('notebooks', {}).get(notebook)
    return None if entry is None else entry.get('results') or {}


def _gpu_devices(table: dict[str, Any]) -> list[str]:
    return [d for d in table if 'GPU' in d]


def _sizes(points: dict[str, Any]) -> list[tuple[int, float]]:
    """``{'16': v, ...}`` as ``[(16, v), ...]`` sorted by size, numbers only."""
    out = []
    for k, v in points.items():
        try:
            n = int(k)
        except (TypeError, ValueError):
            continue
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            out.append((n, float(v)))
    return sorted(out)


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


def _floor_of(floor: Any) -> float | None:
    if isinstance(floor, dict):
        floor = floor.get('matmul')
    if isinstance(floor, (int, float)) and not isinstance(floor, bool):
        return float(floor)
    return None


class _Checker:
    def __init__(self, run: dict[str, Any]):
        self.run = run
        self.current = is_current(run)
        self.spec = spec_of(run)
        self.findings: list[Finding] = []

    def add(self, notebook: str, check: str, ok: bool, detail: str) -> None:
        self.findings.append(Finding(notebook, check, bool(ok), detail))

    def has(self, notebook: str, check: str, results: dict[str, Any], key: str) -> bool:
        """Whether ``key`` is in ``results``; a missing key fails only for the current version."""
        if key in results:
            return True
        if self.current:
            self.add(notebook, check, False, f'không có khóa {key!r} trong kết quả')
        return False

    # -- the checks ------------------------------------------------------------------------

    def status(self) -> None:
        for name, entry in self.run.get('notebooks', {}).items():
            status = entry.get('status')
            self.add(name, 'trạng thái', status == 'ok', f'status {status!r}')

    def required_keys(self) -> None:
        if not self.current:
            return
        for name, keys in REQUIRED.items():
            results = _results(self.run, name)
            if results is None:
                self.add(name, 'có notebook', False, 'lần chạy không có notebook này')
                continue
            for key in keys:
                self.has(name, 'khóa kết quả', results, key)

    def float32_rows(self) -> Iterator[tuple[str, str, list[tuple[int, float]]]]:
        """(notebook, label, [(n, GFLOP/s)]) of every GPU figure claimed to be float32."""
        for name in (EX1, CHOOSE):
            results = _results(self.run, name) or {}
            for dev in _gpu_devices(results.get('gflops') or {}):
                yield name, f'gflops[{dev!r}]', _sizes(results['gflops'][dev])
        results = _results(self.run, CHOOSE) or {}
        for dev in _gpu_devices(results.get('dtype_gflops') or {}):
            row = (results['dtype_gflops'][dev] or {}).get('float32')
            if isinstance(row, dict):
                yield CHOOSE, f'dtype_gflops[{dev!r}].float32', _sizes(row)
            elif isinstance(row, (int, float)) and not isinstance(row, bool):
                yield CHOOSE, f'dtype_gflops[{dev!r}].float32', [(0, float(row))]

    def fp32_peak(self) -> None:
        check = 'float32 ≤ đỉnh FP32'
        for name in (EX1, EX3, EX4, CHOOSE):
            results = _results(self.run, name)
            if results is not None and results.get('tf32') is True:
                self.add(name, check, False, 'tf32 = true trong khi kết quả ghi là float32')
        if self.spec is None:
            self.add('-', check, True, f'bỏ qua: không có data sheet cho {self._gpu()!r}')
            return
        limit = self.spec.fp32_tflops * 1e3 * PEAK_MARGIN
        for name, label, points in self.float32_rows():
            over = [(n, g) for n, g in points if g > limit]
            where = ', '.join(f'n = {n}: {_tflops(g)}' if n else _tflops(g) for n, g in over)
            self.add(
                name,
                check,
                not over,
                f'{label}: {where} > {self.spec.fp32_tflops:g} TFLOP/s (FP32 {self.spec.name}, '
                'data sheet): TF32 ghi là float32'
                if over
                else f'{label}: mọi điểm ≤ {self.spec.fp32_tflops:g} TFLOP/s x{PEAK_MARGIN}',
            )

    def tf32_gain(self) -> None:
        check = 'TF32 nhanh hơn float32'
        results = _results(self.run, CHOOSE) or {}
        try:
            cc = float(self.run.get('machine', {}).get('compute_capability') or 0)
        except ValueError:
            cc = 0.0
        if cc < 8.0:
            return
        for dev in _gpu_devices(results.get('dtype_gflops') or {}):
            rows = results['dtype_gflops'][dev] or {}
            tf32, fp32 = rows.get('tf32'), rows.get('float32')
            if tf32 is None or fp32 is None:
                continue
            if isinstance(tf32, dict) and isinstance(fp32, dict):
                common = sorted(set(dict(_sizes(tf32))) & set(dict(_sizes(fp32))))
                if not common:
                    self.add(CHOOSE, check, False, f'{dev}: float32 và tf32 không có n chung')
                    continue
                n = common[-1]
                tf32, fp32, at = dict(_sizes(tf32))[n], dict(_sizes(fp32))[n], f' ở n = {n}'
            else:
                at = ''
            gain = tf32 / fp32 if fp32 else math.inf
            self.add(
                CHOOSE,
                check,
                gain >= TF32_MIN_GAIN,
                f'{dev}: tf32 / float32 = {gain:.2f}x{at} (cần ≥ {TF32_MIN_GAIN}x)',
            )

    def bandwidth(self) -> None:
        check = 'băng thông so với data sheet'
        results = _results(self.run, CHOOSE) or {}
        table = results.get('bandwidth_gbs') or {}
        for dev in _gpu_devices(table):
            if self.spec is None:
                self.add(CHOOSE, check, True, f'bỏ qua: không có data sheet cho {self._gpu()!r}')
                continue
            value = table[dev]
            frac = value / self.spec.bandwidth_gbs
            lo, hi = BANDWIDTH_RANGE
            self.add(
                CHOOSE,
                check,
                lo <= frac <= hi,
                f'{dev}: {value:.1f} GB/s = {frac:.0%} của {self.spec.bandwidth_gbs:g} GB/s '
                f'({self.spec.name}, data sheet; cần {lo:.0%}-{hi:.0%})',
            )

    def _matmul_times(self, name: str, dev: str) -> list[tuple[int, float]]:
        results = _results(self.run, name) or {}
        if dev in (results.get('median_s') or {}):
            return _sizes(results['median_s'][dev])
        points = _sizes((results.get('gflops') or {}).get(dev) or {})
        return [(n, matmul_seconds(n, g)) for n, g in points if g > 0]

    def dispatch_ex1(self) -> None:
        check = 'không ở mức sàn'
        results = _results(self.run, EX1)
        if results is None:
            return
        floors = results.get('floor_s')
        near = results.get('near_floor') or {}
        for dev in _gpu_devices(results.get('gflops') or {}):
            times = dict(self._matmul_times(EX1, dev))
            gflops = dict(_sizes(results['gflops'][dev]))
            floor = _floor_of((floors or {}).get(dev)) if floors is not None else None
            if floor is not None:
                clear = [n for n in gflops if n not in set(near.get(dev) or [])]
                if not clear:
                    self.add(EX1, check, False, f'{dev}: không điểm nào cách xa mức sàn')
                    continue
                best = max(clear, key=lambda n: gflops[n])
                t = times.get(best, matmul_seconds(best, gflops[best]))
                self.add(
                    EX1,
                    check,
                    t >= NEAR_FLOOR * floor,
                    f'{dev}: điểm tốt nhất n = {best} mất {t * 1e6:.1f} µs = '
                    f'{t / floor:.2f}x mức sàn {floor * 1e6:.1f} µs (cần ≥ {NEAR_FLOOR}x)',
                )
            elif not self.has(EX1, check, results, 'floor_s'):
                why = scaling_verdict(sorted(times.items()))
                self.add(
                    EX1,
                    check,
                    why is None,
                    f'{dev}: {why}' if why else f'{dev}: thời gian tăng theo khối lượng tính',
                )

    def dispatch_choose(self) -> None:
        check = 'trần không ở mức sàn'
        results = _results(self.run, CHOOSE)
        if results is None:
            return
        floors = results.get('floor_s')
        ceilings = results.get('ceiling_gflops')
        for dev in _gpu_devices(results.get('gflops') or {}):
            gflops = dict(_sizes(results['gflops'][dev]))
            floor = _floor_of((floors or {}).get(dev)) if floors is not None else None
            if floor is not None and ceilings is not None:
                ceiling = ceilings.get(dev)
                if ceiling is None:
                    self.add(CHOOSE, check, True, f'{dev}: không có trần (mọi điểm gần mức sàn)')
                    continue
                n = min(gflops, key=lambda k: abs(gflops[k] - ceiling)) if gflops else 0
                t = matmul_seconds(n, ceiling) if n else 0.0
                self.add(
                    CHOOSE,
                    check,
                    t >= NEAR_FLOOR * floor,
                    f'{dev}: trần {_tflops(ceiling)} ở n = {n}, {t * 1e6:.1f} µs mỗi phép nhân = '
                    f'{t / floor:.2f}x mức sàn {floor * 1e6:.1f} µs (cần ≥ {NEAR_FLOOR}x)',
                )
            elif not (
                self.has(CHOOSE, check, results, 'floor_s')
                and self.has(CHOOSE, check, results, 'ceiling_gflops')
            ):
                times = self._matmul_times(CHOOSE, dev)
                why = scaling_verdict(times)
                top = max(gflops.values()) if gflops else 0.0
                self.add(
                    CHOOSE,
                    check,
                    why is None,
                    f'{dev}: "trần" {_tflops(top)} bị loại: {why}'
                    if why
                    else f'{dev}: thời gian tăng theo khối lượng tính',
                )

    def equalities(self) -> None:
        for name in self.run.get('notebooks', {}):
            results = _results(self.run, name) or {}
            for key in EQUALITY_KEYS:
                if key in results:
                    value = results[key]
                    self.add(name, key, value is True, f'{key} = {value!r}')
            if 'max_abs_weight_diff' in results:
                diffs = results['max_abs_weight_diff']
                items = diffs.items() if isinstance(diffs, dict) else [('', diffs)]
                for label, value in items:
                    ok = isinstance(value, (int, float)) and value < MAX_WEIGHT_DIFF
                    self.add(
                        name,
                        'max_abs_weight_diff',
                        ok,
                        f'{label or "trọng số"}: {value!r} (cần < {MAX_WEIGHT_DIFF:g})',
                    )

    def jit_compile(self) -> None:
        results = _results(self.run, DP) or {}
        jit = results.get('jit_compile')
        if isinstance(jit, dict) and {'single', 'mirrored'} <= jit.keys():
            self.add(
                DP,
                'cùng jit_compile',
                jit['single'] == jit['mirrored'],
                f'jit_compile một thiết bị {jit["single"]!r}, MirroredStrategy {jit["mirrored"]!r}',
            )

    def split_gpu(self) -> None:
        check = 'tăng tốc bài 4'
        results = _results(self.run, EX4)
        if results is None or 'speedup' not in results:
            return
        speedup = results['speedup']
        split = results.get('split')
        devices = list(results.get('devices') or [])
        if split is None:
            self.has(EX4, check, results, 'split')
            gpus = self.run.get('machine', {}).get('gpu_count')
            split = gpus == 1 and devices == ['/GPU:0', '/GPU:1']
        if split:
            lo, hi = SPLIT_RANGE
            self.add(
                EX4,
                check,
                lo <= speedup <= hi,
                f'{speedup:.2f}x trên hai thiết bị logic của MỘT GPU (cần {lo}-{hi}x: chung '
                'một GPU thì không thể nhanh hơn)',
            )
        elif devices:
            top = len(devices) * PEAK_MARGIN
            self.add(
                EX4,
                check,
                0 < speedup <= top,
                f'{speedup:.2f}x trên {len(devices)} thiết bị (không thể vượt {len(devices)}x)',
            )

    def crossover(self) -> None:
        check = 'điểm giao'
        results = _results(self.run, EX1)
        if results is None or results.get('crossover_n') is None:
            return
        n = results['crossover_n']
        near = results.get('near_floor')
        gpu = _gpu_devices(results.get('gflops') or {}) or ['TF /GPU:0']
        if near is not None:
            bad = [d for d in gpu if n in (near.get(d) or [])]
            self.add(
                EX1,
                check,
                not bad,
                f'crossover_n = {n} là điểm gần mức sàn của {", ".join(bad)}'
                if bad
                else f'crossover_n = {n} cách xa mức sàn của GPU',
            )
        elif not self.has(EX1, check, results, 'near_floor'):
            whys = [(d, scaling_verdict(self._matmul_times(EX1, d))) for d in gpu]
            bad = [(d, w) for d, w in whys if w]
            self.add(
                EX1,
                check,
                not bad,
                f'crossover_n = {n} lấy từ các điểm GPU ở mức sàn ({bad[0][0]}: {bad[0][1]})'
                if bad
                else f'crossover_n = {n}: các điểm GPU tăng theo khối lượng tính',
            )

    def _gpu(self) -> str | None:
        return self.run.get('machine', {}).get('gpu')


CHECKS: tuple[Callable[[_Checker], None], ...] = (
    _Checker.status,
    _Checker.required_keys,
    _Checker.fp32_peak,
    _Checker.tf32_gain,
    _Checker.bandwidth,
    _Checker.dispatch_ex1,
    _Checker.dispatch_choose,
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
    return [f for f in findings if not f.ok]


def table(findings: list[Finding]) -> str:
    """The findings as a plain-text table: notebook, check, ok, detail."""
    rows = [('notebook', 'kiểm tra', 'ok', 'chi tiết')]
    rows += [(f.notebook, f.check, 'ok' if f.ok else 'HỎNG', f.detail) for f in findings]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    return '\n'.join(
        '  '.join(cell.ljust(w) for cell, w in zip(r[:3], widths, strict=True)) + '  ' + r[3]
        for r in rows
    )
