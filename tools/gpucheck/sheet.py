"""Figures against the data sheet of the GPU that made them (``d2lhelpers.datasheets``).

* ``float32 ≤ đỉnh FP32``: no float32 GFLOP/s of a GPU (any n), nor the work of exercise 4 (4n^3
  FLOP) or of a data-parallel step (``step_flops``) over its time, above 1.05 x the FP32 row:
  above it TF32 ran, or the clock stopped before the GPU finished (an unsynchronised n = 8192
  matmul reads as ~30 PFLOP/s). A ``tf32: true`` where float32 is claimed fails too.
* ``float32 ≥ 20% đỉnh FP32``: the largest-n float32 GFLOP/s, when n >= ``KERNEL_N``.
* ``TF32 nhanh hơn float32``: a gain of at least a quarter of the row's (see ``TF32_SHARE``).
* ``băng thông so với data sheet``: 50-100% of the row.
"""

from __future__ import annotations

from collections.abc import Iterator

from d2lhelpers.timing import format_seconds

from . import check
from .check import Checker, all_gpus, gpu_device, number, sizes, tflops

# Healthy runs measure ~51% (H200, n = 8192, TF32 off) to ~55% (T4) of FP32; idle clocks are
# ~10-20% of boost: 20% leaves a 2.5x margin and still rejects those, or a figure 10x off.
FP32_FLOOR = 0.20
# R = TF32 / FP32 of the row. R > 1.1 (2x for L4 to 8x for A100) needs >= 1 + 0.25 (R - 1): L4
# 1.25x, H100 2.6x, A100 2.75x (a gain near 1: both rows timed one mode). R <= 1.1 (GeForce, where
# dense TF32 = FP32) needs >= 0.9x. A GPU without TF32 (T4, V100) is not judged.
TF32_SHARE, TF32_FLAT, TF32_FLAT_MIN = 0.25, 1.1, 0.9
# Above 100% is impossible (the 1 GiB arrays dwarf any L2); HBM reaches 80-90%, GDDR6 with ECC
# 70-80%.
BANDWIDTH_RANGE = (0.5, 1.0)
DTYPE_N = 8192  # choose-a-gpu's dtype_size 'auto' on a GPU


def float32_rows(c: Checker) -> Iterator[tuple[str, str, list[tuple[int, float]]]]:
    """(notebook, label, [(n, GFLOP/s)]) of every GPU figure claimed to be float32."""
    for name in (check.EX1, check.CHOOSE):
        gflops = c.results(name, 'gflops').get('gflops', {})
        for dev in filter(gpu_device, gflops):
            yield name, f'gflops[{dev!r}]', sizes(gflops[dev])
    entry = c.run.get('notebooks', {}).get(check.CHOOSE) or {}
    n = (entry.get('parameters') or {}).get('dtype_size', 'auto')
    dtypes = c.results(check.CHOOSE, 'dtype_gflops').get('dtype_gflops', {})
    for dev in filter(gpu_device, dtypes):
        value = dtypes[dev].get('float32')
        label = f'dtype_gflops[{dev!r}].float32'
        point = (DTYPE_N if n == 'auto' else n, value)
        yield check.CHOOSE, label, [point] if number(value) else []


def timed_work(c: Checker) -> Iterator[tuple[str, str, float, float, list[str]]]:
    """(notebook, what, FLOP, seconds, GPUs doing it) of exercise 4 and data-parallel."""
    results = c.results(check.EX4, 'n', 'devices', 'median_s', 'split')
    if all_gpus(results.get('devices')):
        n, devices, times = results['n'], results['devices'], results['median_s']
        apart = devices[:1] if results['split'] else devices[:2]
        for key, on in (('sequential', devices[:1]), ('concurrent', apart)):
            if number(times.get(key)):
                yield check.EX4, f'median_s.{key} (2 phép nhân n = {n})', 4 * n**3, times[key], on
    results = c.results(check.DP, 'devices', 'step_flops', 'step_time_s', 'split')
    if all_gpus(results.get('devices')) and number(results['step_flops']):
        for k, t in results['step_time_s'].items():
            on = results['devices'][: 1 if results['split'] else int(k)]
            if number(t):
                yield check.DP, f'step_time_s.{k} ({k} replica)', results['step_flops'], t, on


def float32_claims(c: Checker) -> Iterator[tuple[str, str, float, list[str]]]:
    """(notebook, what, GFLOP/s, GPUs doing it) of every float32 rate: the fastest point of each
    row of ``float32_rows``, and the FLOP over the seconds of each ``timed_work``."""
    for name, label, points in float32_rows(c):
        if points:
            n, top = max(points, key=lambda p: p[1])
            yield name, f'{label}: cao nhất n = {n}: {tflops(top)}', top, [label]
    for name, what, flop, seconds, on in timed_work(c):
        rate = flop / seconds / 1e9
        took = f'{flop / 1e9:.0f} GFLOP trong {format_seconds(seconds)} = {tflops(rate)}'
        yield name, f'{what}: {took}', rate, on


def fp32_peak(c: Checker) -> None:
    for name in (check.EX1, check.EX3, check.EX4, check.CHOOSE, check.DP):
        if c.results(name).get('tf32') is True:
            c.add(name, check.FP32_PEAK, False, 'tf32 = true trong khi kết quả ghi là float32')
    for name, what, rate, on in float32_claims(c):
        specs = [c.spec(name, check.FP32_PEAK, d) for d in on]
        if None not in specs:
            peak = sum(s.fp32_tflops for s in specs)
            models = ' + '.join(s.name for s in specs)
            ok = rate <= peak * 1e3 * check.PEAK_MARGIN
            need = f'cần ≤ {peak:g} TFLOP/s x{check.PEAK_MARGIN}, FP32 {models}, data sheet'
            why = '' if ok else ': TF32 ghi là float32, hoặc đồng hồ dừng trước khi GPU xong'
            c.add(name, check.FP32_PEAK, ok, f'{what} ({need}){why}')


def fp32_floor(c: Checker) -> None:
    for name, label, points in float32_rows(c):
        spec = c.spec(name, check.FP32_LOW, label) if points else None
        if spec is None:
            continue
        n, gflops = points[-1]
        if n < check.KERNEL_N:
            small = f'n lớn nhất {n} < {check.KERNEL_N}: chưa so được với đỉnh'
            c.skip(name, check.FP32_LOW, f'{label}: {small}')
            continue
        frac = gflops / (spec.fp32_tflops * 1e3)
        need = f'cần ≥ {FP32_FLOOR:.0%}: thấp hơn là GPU chạy ở xung nhịp thấp hoặc phép đo sai'
        sheet = f'{spec.fp32_tflops:g} TFLOP/s (FP32 {spec.name}, data sheet; {need})'
        detail = f'{label}: n = {n}: {tflops(gflops)} = {frac:.0%} của {sheet}'
        c.add(name, check.FP32_LOW, frac >= FP32_FLOOR, detail)


def tf32_gain(c: Checker) -> None:
    dtypes = c.results(check.CHOOSE, 'dtype_gflops').get('dtype_gflops', {})
    for dev in filter(gpu_device, dtypes):
        spec = c.spec(check.CHOOSE, check.TF32_GAIN, dev)
        if spec is None or not spec.tf32_tflops:  # no TF32 on this GPU (T4, V100): not judged
            continue
        tf32, fp32 = dtypes[dev].get('tf32'), dtypes[dev].get('float32')
        sheet = f'{spec.name}: TF32 / FP32 = {spec.tf32_tflops / spec.fp32_tflops:.2f}x'
        if not (number(tf32) and number(fp32)):  # a bad number is the finite check's
            missing = 'tf32' if tf32 is None else 'float32' if fp32 is None else None
            if missing:
                detail = f'{dev}: không có số đo {missing}; {sheet}'
                c.add(check.CHOOSE, check.TF32_GAIN, False, detail)
            continue
        ratio = spec.tf32_tflops / spec.fp32_tflops
        need = 1 + TF32_SHARE * (ratio - 1) if ratio > TF32_FLAT else TF32_FLAT_MIN
        gain = tf32 / fp32
        detail = f'{dev}: tf32 / float32 = {gain:.2f}x; {sheet} (data sheet), cần ≥ {need:.2f}x'
        c.add(check.CHOOSE, check.TF32_GAIN, gain >= need, detail)


def bandwidth(c: Checker) -> None:
    table = c.results(check.CHOOSE, 'bandwidth_gbs').get('bandwidth_gbs', {})
    lo, hi = BANDWIDTH_RANGE
    for dev in filter(gpu_device, table):
        spec = c.spec(check.CHOOSE, check.BANDWIDTH, dev)
        if spec is not None and number(table[dev]):
            frac = table[dev] / spec.bandwidth_gbs
            sheet = f'{spec.bandwidth_gbs:g} GB/s ({spec.name}, data sheet; cần {lo:.0%}-{hi:.0%})'
            detail = f'{dev}: {table[dev]:.1f} GB/s = {frac:.0%} của {sheet}'
            c.add(check.CHOOSE, check.BANDWIDTH, lo <= frac <= hi, detail)


RULES = (fp32_peak, fp32_floor, tf32_gain, bandwidth)
