"""Figures against the data sheet of the GPU that made them (``d2lhelpers.datasheets``): float32
not above the FP32 peak nor far below it, TF32 faster where the sheet says so, bandwidth
within 50-100%.

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
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from d2lhelpers.timing import format_seconds

from .check import (
    BANDWIDTH,
    BANDWIDTH_RANGE,
    CHOOSE,
    DP,
    EX1,
    EX3,
    EX4,
    FP32_FLOOR,
    FP32_LOW,
    FP32_PEAK,
    KERNEL_N,
    PEAK_MARGIN,
    TF32_FLAT,
    TF32_FLAT_MIN,
    TF32_GAIN,
    TF32_SHARE,
    Checker,
    _dict,
    _gpu_devices,
    _number,
    _sizes,
    _strings,
    _tflops,
    ex4_split,
    gpu_device,
)


def dtype_n(c: Checker) -> int:
    """n of choose-a-gpu's dtype matmuls: its parameter, 8192 on a GPU by default; 0 when
    unknown (old runs)."""
    params = (c.run.get('notebooks', {}).get(CHOOSE) or {}).get('parameters') or {}
    n = params.get('dtype_size', 'auto')
    if isinstance(n, int) and not isinstance(n, bool):
        return n
    return 8192 if c.current and n == 'auto' else 0


def float32_rows(c: Checker) -> Iterator[tuple[str, str, list[tuple[int, float]]]]:
    """(notebook, label, [(n, GFLOP/s)]) of every GPU figure claimed to be float32; n = 0:
    size unknown."""
    for name in (EX1, CHOOSE):
        results = c.results(name) or {}
        for dev in _gpu_devices(results.get('gflops')):
            yield name, f'gflops[{dev!r}]', _sizes(_dict(results['gflops'][dev]))
    results = c.results(CHOOSE) or {}
    for dev in _gpu_devices(results.get('dtype_gflops')):
        row = _dict(results['dtype_gflops'][dev]).get('float32')
        if isinstance(row, dict):
            yield CHOOSE, f'dtype_gflops[{dev!r}].float32', _sizes(row)
        elif _number(row):
            yield CHOOSE, f'dtype_gflops[{dev!r}].float32', [(dtype_n(c), float(row))]


def timed_work(c: Checker) -> Iterator[tuple[str, str, float, float, list[str]]]:
    """(notebook, what, FLOP, seconds, GPUs doing it) of exercise 4 and data-parallel."""
    results = c.results(EX4) or {}
    devices, times, n = _strings(results.get('devices')), _dict(results.get('median_s')), 0
    if _number(results.get('n')):
        n = int(results['n'])
    if n and len(devices) >= 2 and all(map(gpu_device, devices)):
        apart = devices[:1] if ex4_split(c, results) else devices[:2]
        for key, on in (('sequential', devices[:1]), ('concurrent', apart)):
            if _number(times.get(key)) and times[key] > 0:
                yield EX4, f'median_s.{key} (2 phép nhân n = {n})', 4 * n**3, times[key], on
    results = c.results(DP) or {}
    devices, flop = _strings(results.get('devices')), results.get('step_flops')
    if _number(flop) and devices and all(map(gpu_device, devices)):
        for key, t in _dict(results.get('step_time_s')).items():
            if str(key).isdigit() and _number(t) and t > 0:
                k = int(key)
                on = devices[:1] if results.get('split', True) else devices[:k]
                yield DP, f'step_time_s.{key} ({k} replica)', flop, t, on


def fp32_peak(c: Checker) -> None:
    for name in (EX1, EX3, EX4, CHOOSE, DP):
        results = c.results(name)
        if results is not None and results.get('tf32') is True:
            c.add(name, FP32_PEAK, False, 'tf32 = true trong khi kết quả ghi là float32')
    for name, label, points in float32_rows(c):
        spec = c.spec(label)
        if spec is None:
            c.no_sheet(name, FP32_PEAK, label)
            continue
        limit = spec.fp32_tflops * 1e3 * PEAK_MARGIN
        over = [(n, g) for n, g in points if g > limit]
        where = ', '.join(f'n = {n}: {_tflops(g)}' if n else _tflops(g) for n, g in over)
        c.add(
            name,
            FP32_PEAK,
            not over,
            f'{label}: {where} > {spec.fp32_tflops:g} TFLOP/s (FP32 {spec.name}, '
            'data sheet): TF32 ghi là float32, hoặc đồng hồ dừng trước khi GPU xong'
            if over
            else f'{label}: mọi điểm ≤ {spec.fp32_tflops:g} TFLOP/s x{PEAK_MARGIN} '
            f'(FP32 {spec.name}, data sheet)',
        )
    for name, what, flop, seconds, on in timed_work(c):
        specs = {d: c.spec(d) for d in on}
        if None in specs.values():
            c.no_sheet(name, FP32_PEAK, next(d for d, s in specs.items() if s is None))
            continue
        specs = list(specs.values())
        peak = sum(s.fp32_tflops for s in specs) * 1e3
        rate = flop / seconds / 1e9
        c.add(
            name,
            FP32_PEAK,
            rate <= peak * PEAK_MARGIN,
            f'{what}: {flop / 1e9:.0f} GFLOP trong {format_seconds(seconds)} = '
            f'{_tflops(rate)} (cần ≤ {peak / 1e3:g} TFLOP/s x{PEAK_MARGIN}, FP32 '
            f'{" + ".join(s.name for s in specs)}, data sheet)',
        )


def fp32_floor(c: Checker) -> None:
    for name, label, points in float32_rows(c):
        if not points:
            continue
        spec = c.spec(label)
        if spec is None:
            c.no_sheet(name, FP32_LOW, label)
            continue
        n, gflops = points[-1]
        if n < KERNEL_N:
            size = f'n lớn nhất {n} < {KERNEL_N}' if n else 'không biết n của phép đo'
            c.skip(name, FP32_LOW, f'{label}: {size}: chưa so được với đỉnh')
            continue
        frac = gflops / (spec.fp32_tflops * 1e3)
        c.add(
            name,
            FP32_LOW,
            frac >= FP32_FLOOR,
            f'{label}: n = {n}: {_tflops(gflops)} = {frac:.0%} của {spec.fp32_tflops:g} '
            f'TFLOP/s (FP32 {spec.name}, data sheet; cần ≥ {FP32_FLOOR:.0%}: thấp hơn là GPU '
            'chạy ở xung nhịp thấp hoặc phép đo sai)',
        )


def tf32_gain(c: Checker) -> None:
    results = c.results(CHOOSE) or {}
    for dev in _gpu_devices(results.get('dtype_gflops')):
        spec = c.spec(dev)
        if spec is None:
            c.no_sheet(CHOOSE, TF32_GAIN, dev)
            continue
        if not spec.tf32_tflops:
            continue  # no TF32 on this GPU (T4, V100)
        rows = _dict(results['dtype_gflops'][dev])
        tf32, fp32 = rows.get('tf32'), rows.get('float32')
        if tf32 is None or fp32 is None:
            if c.current:
                c.add(
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
                c.add(CHOOSE, TF32_GAIN, False, f'{dev}: float32 và tf32 không có n chung')
                continue
            n = common[-1]
            tf32, fp32, at = dict(_sizes(tf32))[n], dict(_sizes(fp32))[n], f' ở n = {n}'
        if not (_number(tf32) and _number(fp32)):
            continue  # not numbers: the finite-number check reports them
        ratio = spec.tf32_tflops / spec.fp32_tflops
        need = 1 + TF32_SHARE * (ratio - 1) if ratio > TF32_FLAT else TF32_FLAT_MIN
        gain = tf32 / fp32 if fp32 > 0 else math.inf
        c.add(
            CHOOSE,
            TF32_GAIN,
            gain >= need,
            f'{dev}: tf32 / float32 = {gain:.2f}x{at}; {spec.name}: TF32 / FP32 = '
            f'{ratio:.2f}x (data sheet), cần ≥ {need:.2f}x',
        )


def bandwidth(c: Checker) -> None:
    results = c.results(CHOOSE) or {}
    table = results.get('bandwidth_gbs')
    for dev in _gpu_devices(table):
        spec = c.spec(dev)
        if spec is None:
            c.no_sheet(CHOOSE, BANDWIDTH, dev)
            continue
        value = table[dev]
        if not _number(value):
            continue  # the finite-number check reports it
        frac = value / spec.bandwidth_gbs
        lo, hi = BANDWIDTH_RANGE
        c.add(
            CHOOSE,
            BANDWIDTH,
            lo <= frac <= hi,
            f'{dev}: {value:.1f} GB/s = {frac:.0%} của {spec.bandwidth_gbs:g} GB/s '
            f'({spec.name}, data sheet; cần {lo:.0%}-{hi:.0%})',
        )


RULES = (
    fp32_peak,
    fp32_floor,
    tf32_gain,
    bandwidth,
)
