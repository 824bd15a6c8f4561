"""Figures against each other.

* ``không ở mức sàn`` (ex1) / ``trần không ở mức sàn`` (choose-a-gpu): a GPU row that reaches
  n >= ``KERNEL_N`` ends clear of its dispatch floor and grows with the work
  (``scaling_verdict``), and choose-a-gpu names a ceiling; a shorter row is unchecked.
* ``thứ tự thời gian``: more work on the same GPU is not faster than less (``MORE_WORK_MIN``).
* ``tăng tốc bài 4``: possible on the devices it ran on (see ``split_gpu``).
* ``điểm giao``: exercise 1's ``crossover_n`` agrees with its medians (``crossover``).
"""

from __future__ import annotations

from typing import Any

from d2lhelpers.timing import NEAR_FLOOR, TIE_BAND, format_seconds

from . import check
from .check import Checker, all_gpus, gpu_device, number, sizes, strings

SCALING_WORK, STEP_WORK = 100, 8
SPLIT_RANGE = (0.85, 1.10)
SEPARATE_MIN = 0.8
# Exercise 2 via host (two copies and a wait) vs on the device vs the one-write floor; exercise 3
# (a) vs (b), the graph with its log vs without, (b) vs the eager loop without log; data-parallel
# steps and forward passes vs their floors: the first of each pair does more on the same GPU.
MORE_WORK_MIN = 0.8
EX2_PAIRS = (
    ('via_host', 'on_device', 'qua host thêm hai lần chép qua PCIe và một lần chờ GPU'),
    ('on_device', 'floor', 'ghi mọi tham số nhiều việc hơn cùng số phép ghi trên biến vô hướng'),
)
EX3_PAIRS = (
    ('host_every_step', 'device_once', '(a) thêm một lần chép và một lần chờ mỗi bước'),
    ('tf_function', 'no_logging', 'cùng vòng lặp trong đồ thị, thêm ghi log'),
    ('device_once', 'eager_no_logging', 'cùng các phép nhân eager, thêm tính chuẩn'),
)


def scaling_verdict(times: list[tuple[int, float]]) -> str | None:
    """Why matmul times of one device (size, seconds) are dispatch-bound, or None: the work of a
    matmul grows as n^3; on the kernel the time follows it, at the dispatch floor it stays flat.
    Judged from the smallest size, then from the size before the largest."""
    if len(times) < 2:
        return None
    n1, t1 = times[-1]
    for (n0, t0), least, where in (
        (times[0], SCALING_WORK, 'mọi điểm đều ở mức sàn gửi phép toán'),
        (times[-2], STEP_WORK, 'điểm lớn nhất vẫn ở mức sàn gửi phép toán'),
    ):
        work = (n1 / n0) ** 3
        if work >= least and t1 < NEAR_FLOOR * t0:
            grew = f'thời gian chỉ tăng {t1 / t0:.2f}x trong khi khối lượng tính gấp {work:.0f}x'
            return f'từ n = {n0} đến n = {n1} {grew}: {where}'
    return None


def crossover(times: dict[str, dict[str, float]]) -> int | None:
    """The smallest n from which the fastest GPU beats the fastest CPU at every size both
    measured, by more than ``TIE_BAND`` (``times``: label -> {n: median seconds}). This is
    ``compare``'s rule without its IQR half (a run keeps medians only), so the crossover a
    notebook finds with ``compare`` is this n or a later one."""
    gpus = [sizes(t) for d, t in times.items() if gpu_device(d)]
    cpus = [sizes(t) for d, t in times.items() if not gpu_device(d)]
    common = set.intersection(*(set(dict(t)) for t in gpus + cpus)) if gpus and cpus else set()
    wins = [
        min(dict(t)[n] for t in cpus) > TIE_BAND * min(dict(t)[n] for t in gpus)
        for n in sorted(common)
    ]
    return next((n for i, n in enumerate(sorted(common)) if all(wins[i:])), None)


def dispatch(c: Checker) -> None:
    """A GPU row of exercise 1 or choose-a-gpu that reaches n >= check.KERNEL_N: its largest point
    clear of the floor, its time growing with the work (see the module docstring)."""
    for name, rule in ((check.EX1, check.OFF_FLOOR), (check.CHOOSE, check.CEILING)):
        results = c.results(name, 'gflops')
        for dev in filter(gpu_device, results.get('gflops', {})):
            if name == check.EX1:
                times = sizes(results.get('median_s', {}).get(dev, {}))
            else:
                times = [(n, 2 * n**3 / (g * 1e9)) for n, g in sizes(results['gflops'][dev])]
            if not times:
                continue
            n, t = times[-1]
            if n < check.KERNEL_N:
                small = f'n lớn nhất {n} < {check.KERNEL_N}: GPU có thể còn ở mức sàn'
                c.skip(name, rule, f'{dev}: {small}')
                continue
            problems, floor = [], results.get('floor_s', {}).get(dev)
            if name == check.CHOOSE and results.get('ceiling_gflops', {}).get(dev, 0) is None:
                problems.append('không có trần: notebook thấy mọi điểm GPU ở mức sàn')
            at = f'n = {n} mất {format_seconds(t)}'
            if number(floor):
                at += f' = {t / floor:.2f}x mức sàn {format_seconds(floor)}'
                if t < NEAR_FLOOR * floor:
                    why = 'phép đo không chờ GPU, hoặc không đo phép nhân'
                    problems.append(f'{at} (cần ≥ {NEAR_FLOOR}x): {why}')
            problems = [p for p in [*problems, scaling_verdict(times)] if p]
            ok = f'{at}; thời gian tăng theo khối lượng tính'
            c.add(name, rule, not problems, f'{dev}: {"; ".join(problems) if problems else ok}')


def more_work(c: Checker, name: str, more: str, t_more: Any, less: str, t_less: Any, why: str):
    if number(t_more) and number(t_less):
        x = t_more / t_less
        ratio = f'{format_seconds(t_more)} = {x:.2f}x {less} {format_seconds(t_less)}'
        detail = f'{more} {ratio} (cần ≥ {MORE_WORK_MIN}x: {why})'
        c.add(name, check.ORDER, x >= MORE_WORK_MIN, detail)


def timing_order(c: Checker) -> None:
    for name, where, pairs in ((check.EX2, 'devices', EX2_PAIRS), (check.EX3, 'device', EX3_PAIRS)):
        results = c.results(name, where, 'median_s')
        if all_gpus(strings(results.get(where))):
            t = results['median_s']
            for more, less, why in pairs:
                more_work(c, name, more, t.get(more), less, t.get(less), why)
    results = c.results(check.DP, 'devices', 'step_time_s', 'step_floor_s', 'model_parallel_s')
    if all_gpus(results.get('devices')):
        why = 'cùng bước huấn luyện, mạng rộng so với mạng một nơ-ron'
        for k, t in results['step_time_s'].items():
            floor = results['step_floor_s'].get(k)
            more_work(c, check.DP, f'step_time_s.{k}', t, f'step_floor_s.{k}', floor, why)
        why = 'lượt xuôi thật so với hàm gần như không tính gì'
        for k, (forward, floor) in results['model_parallel_s'].items():
            key = f'model_parallel_s.{k}'
            more_work(c, check.DP, f'{key}[0]', forward, f'{key}[1]', floor, why)


def split_gpu(c: Checker) -> None:
    """Two logical devices of ONE GPU (``split``): 0.85-1.10x (one chip: only wave tails can
    overlap). Separate GPUs: <= 1.05 x their number, and >= 0.8x when they are one model (each
    matmul has its own GPU and its inputs are copied before the clock starts: slower than one
    GPU doing both means they interfere)."""
    results = c.results(check.EX4, 'speedup', 'devices', 'split')
    if not (number(results.get('speedup')) and all_gpus(results['devices'])):
        return  # a bad number: the finite check; no GPU: the GPU presence check
    speedup, devices = results['speedup'], results['devices']
    if results['split']:
        lo, hi = SPLIT_RANGE
        why = f'cần {lo}-{hi}x: chung một GPU thì không thể nhanh hơn'
        detail = f'{speedup:.2f}x trên hai thiết bị logic của MỘT GPU ({why})'
        c.add(check.EX4, check.SPEEDUP, lo <= speedup <= hi, detail)
        return
    names = {c.gpu_name(d) for d in devices}
    same = len(names) == 1 and None not in names
    why = 'khác loại: không có cận dưới'
    if same:
        why = f'cùng loại {names.pop()}: cần ≥ {SEPARATE_MIN}x, chậm hơn là hai GPU cản nhau'
    ok = (speedup >= SEPARATE_MIN or not same) and speedup <= len(devices) * check.PEAK_MARGIN
    detail = f'{speedup:.2f}x trên {len(devices)} GPU riêng (không thể vượt {len(devices)}x; {why})'
    c.add(check.EX4, check.SPEEDUP, ok, detail)


def crossover_rule(c: Checker) -> None:
    results = c.results(check.EX1, 'crossover_n', 'median_s')
    if results.get('crossover_n') is None:
        return  # no GPU, or no crossover at the sizes measured
    n, first = results['crossover_n'], crossover(results['median_s'])
    measured = any(str(n) in t for d, t in results['median_s'].items() if gpu_device(d))
    ok = measured and first is not None and n >= first
    detail = f'crossover_n = {n}; theo trung vị, GPU nhanh nhất thắng CPU nhanh nhất quá dải hòa '
    detail += f'{TIE_BAND}x ở mọi n đã đo từ n = {first}' if first else 'không thắng ở n nào'
    if not measured:
        detail = f'crossover_n = {n} không phải một n đã đo trên cả hai'
    c.add(check.EX1, check.CROSSOVER, ok, detail)


RULES = (dispatch, timing_order, split_gpu, crossover_rule)
