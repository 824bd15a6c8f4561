"""Figures against each other: GPU matmuls clear of the dispatch floor and growing with the
work, more work not faster than less, exercise 4's speedup possible on its devices, exercise 1's
crossover agreeing with its medians.

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
* ``tăng tốc bài 4`` (GPU runs): two logical devices of ONE GPU: 0.85-1.10x (one chip; only wave
  tails can overlap); separate GPUs: <= 1.05 x the number of devices, and, when they are the same
  model, >= 0.8x (each matmul has its own GPU and its inputs are copied before the clock starts:
  slower than one GPU doing both means the devices interfere).
* ``điểm giao``: exercise 1's crossover agrees with its medians: from ``crossover_n`` on, the
  fastest GPU beats the fastest CPU beyond the tie band at every common size (a crossover inside
  the GPU's floor zone is the real crossover of eager code: the floor sets it).
"""

from __future__ import annotations

from typing import Any

from d2lhelpers.timing import NEAR_FLOOR, TIE_BAND, format_seconds

from .check import (
    CEILING,
    CHOOSE,
    CROSSOVER,
    DP,
    EX1,
    EX2,
    EX3,
    EX4,
    KERNEL_N,
    MORE_WORK_MIN,
    OFF_FLOOR,
    ORDER,
    PEAK_MARGIN,
    SEPARATE_MIN,
    SPEEDUP,
    SPLIT_RANGE,
    Checker,
    _dict,
    _floor_of,
    _gpu_devices,
    _number,
    _sizes,
    _strings,
    ex4_split,
    gpu_device,
    matmul_seconds,
    scaling_verdict,
)


def matmul_times(c: Checker, name: str, dev: str) -> list[tuple[int, float]]:
    results = c.results(name) or {}
    if dev in (results.get('median_s') or {}):
        return _sizes(_dict(results['median_s'][dev]))
    points = _sizes(_dict(_dict(results.get('gflops')).get(dev)))
    return [(n, matmul_seconds(n, g)) for n, g in points if g > 0]


def off_floor(c: Checker, name: str, check: str, dev: str, floor: float | None) -> None:
    """A GPU row that reaches n >= KERNEL_N: its largest point clear of the floor, its time
    growing with the work (see the module docstring)."""
    times = matmul_times(c, name, dev)
    if not times:
        return
    n, t = times[-1]
    if floor is None:  # old notebooks: the growth of the time alone
        why = scaling_verdict(times)
        c.add(
            name,
            check,
            why is None,
            f'{dev}: {why}' if why else f'{dev}: thời gian tăng theo khối lượng tính',
        )
        return
    if n < KERNEL_N:
        c.skip(name, check, f'{dev}: n lớn nhất {n} < {KERNEL_N}: GPU có thể còn ở mức sàn')
        return
    problems = []
    ceilings = (c.results(name) or {}).get('ceiling_gflops')
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
    c.add(
        name,
        check,
        not problems,
        f'{dev}: ' + '; '.join(problems)
        if problems
        else f'{dev}: n = {n} mất {format_seconds(t)} = {t / floor:.2f}x mức sàn '
        f'{format_seconds(floor)}; thời gian tăng theo khối lượng tính',
    )


def dispatch(c: Checker, name: str, check: str) -> None:
    """``off_floor`` for every GPU row of ``name``; without ``floor_s`` (old notebooks) by
    the growth of the time alone."""
    results = c.results(name)
    if results is None:
        return
    for dev in _gpu_devices(results.get('gflops')):
        if 'floor_s' in results:
            floor = _floor_of(_dict(results['floor_s']).get(dev))
            if floor is None:
                c.add(name, check, False, f'{dev}: không có floor_s hợp lệ')
                continue
        elif c.current:
            continue  # the missing key is a failure of its own (khóa kết quả)
        else:
            floor = None
        off_floor(c, name, check, dev, floor)


def dispatch_ex1(c: Checker) -> None:
    dispatch(c, EX1, OFF_FLOOR)


def dispatch_choose(c: Checker) -> None:
    dispatch(c, CHOOSE, CEILING)


def more_work(c: Checker, name: str, more: str, t_more: Any, less: str, t_less: Any, why: str):
    if not (_number(t_more) and _number(t_less)) or t_less <= 0:
        return
    x = t_more / t_less
    c.add(
        name,
        ORDER,
        x >= MORE_WORK_MIN,
        f'{more} {format_seconds(t_more)} = {x:.2f}x {less} {format_seconds(t_less)} '
        f'(cần ≥ {MORE_WORK_MIN}x: {why})',
    )


def timing_order(c: Checker) -> None:
    results = c.results(EX2) or {}
    devices = _strings(results.get('devices'))
    times = results.get('median_s') or {}
    if devices and all(map(gpu_device, devices)) and isinstance(times, dict):
        more_work(
            c,
            EX2,
            'qua host',
            times.get('via_host'),
            'trên thiết bị',
            times.get('on_device'),
            'qua host thêm hai lần chép qua PCIe và một lần chờ GPU',
        )
        more_work(
            c,
            EX2,
            'trên thiết bị',
            times.get('on_device'),
            'mức sàn',
            times.get('floor'),
            'ghi mọi tham số nhiều việc hơn cùng số phép ghi trên biến vô hướng',
        )
    results = c.results(EX3) or {}
    times = results.get('median_s') or {}
    if gpu_device(results.get('device')) and isinstance(times, dict):
        for more, less, why in (
            ('host_every_step', 'device_once', '(a) thêm một lần chép và một lần chờ mỗi bước'),
            ('tf_function', 'no_logging', 'cùng vòng lặp trong đồ thị, thêm ghi log'),
            ('device_once', 'eager_no_logging', 'cùng các phép nhân eager, thêm tính chuẩn'),
        ):
            more_work(c, EX3, more, times.get(more), less, times.get(less), why)
    results = c.results(DP) or {}
    devices = _strings(results.get('devices'))
    if devices and all(map(gpu_device, devices)):
        steps, floors = results.get('step_time_s') or {}, results.get('step_floor_s') or {}
        for key, t in steps.items() if isinstance(steps, dict) else ():
            why = 'cùng bước huấn luyện, mạng rộng so với mạng một nơ-ron'
            label = f'step_time_s.{key}'
            more_work(c, DP, label, t, f'step_floor_s.{key}', floors.get(key), why)
        mp = results.get('model_parallel_s') or {}
        for key, pair in mp.items() if isinstance(mp, dict) else ():
            if isinstance(pair, list) and len(pair) == 2:
                why = 'lượt xuôi thật so với hàm gần như không tính gì'
                label = f'model_parallel_s.{key}'
                more_work(c, DP, f'{label}[0]', pair[0], f'{label}[1]', pair[1], why)


def split_gpu(c: Checker) -> None:
    results = c.results(EX4)
    if results is None or not _number(results.get('speedup')):
        return
    speedup = results['speedup']
    devices = _strings(results.get('devices'))
    if not devices or not all(map(gpu_device, devices)):
        return  # no GPU: the GPU presence check says so
    if ex4_split(c, results):
        lo, hi = SPLIT_RANGE
        c.add(
            EX4,
            SPEEDUP,
            lo <= speedup <= hi,
            f'{speedup:.2f}x trên hai thiết bị logic của MỘT GPU (cần {lo}-{hi}x: chung '
            'một GPU thì không thể nhanh hơn)',
        )
        return
    names = {c.gpu_name(d) for d in devices}
    same = len(names) == 1 and None not in names
    low = speedup >= SEPARATE_MIN if same else speedup > 0
    why = (
        f'cùng loại {names.pop()}: cần ≥ {SEPARATE_MIN}x, chậm hơn là hai GPU cản nhau'
        if same
        else 'khác loại: không có cận dưới'
    )
    c.add(
        EX4,
        SPEEDUP,
        low and speedup <= len(devices) * PEAK_MARGIN,
        f'{speedup:.2f}x trên {len(devices)} GPU riêng (không thể vượt {len(devices)}x; {why})',
    )


def crossover(c: Checker) -> None:
    """Exercise 1's crossover agrees with its own medians: from ``crossover_n`` on, the fastest
    GPU beats the fastest CPU by more than the tie band at every common size (a crossover
    inside the GPU's floor zone is the real crossover of eager code: the floor sets it)."""
    results = c.results(EX1)
    if results is None or results.get('crossover_n') is None:
        return
    n = results['crossover_n']
    times = {d: dict(matmul_times(c, EX1, d)) for d in results.get('median_s') or {}}
    gpus = [t for d, t in times.items() if gpu_device(d)]
    cpus = [t for d, t in times.items() if not gpu_device(d)]
    common = sorted(set.intersection(*(set(t) for t in gpus + cpus))) if gpus and cpus else []
    if n not in common:
        c.add(EX1, CROSSOVER, False, f'crossover_n = {n} không phải một n đã đo trên cả hai')
        return
    lost = [
        m
        for m in common
        if m >= n and min(t[m] for t in gpus) * TIE_BAND >= min(t[m] for t in cpus)
    ]
    c.add(
        EX1,
        CROSSOVER,
        not lost,
        f'crossover_n = {n}, nhưng ở n = {lost} GPU nhanh nhất không thắng CPU nhanh nhất '
        f'quá dải hòa {TIE_BAND}x'
        if lost
        else f'crossover_n = {n}: từ đó GPU thắng CPU ở mọi n đã đo (quá dải hòa {TIE_BAND}x)',
    )


RULES = (
    dispatch_ex1,
    dispatch_choose,
    timing_order,
    split_gpu,
    crossover,
)
