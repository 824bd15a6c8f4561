"""d2lhelpers.timing: benchmark with a fake clock, bad arguments, and checks on real devices;
compare, interleave, breakdown.

The fake-clock tests pin the order of device syncs, clock reads and calls. The real checks need a
GPU to mean anything (an unsynchronised or dispatch-bound timing only shows on an asynchronous
device) and are skipped without one. The agreement of ``benchmark`` with an independent
measurement is a benchmark, not a gate: it is marked ``timing`` and run by ``make bench``.
"""

from __future__ import annotations

import math
import os
import statistics
import time

import pytest

from d2lhelpers import benchmark, compare, find_spec, format_seconds, interleave
from d2lhelpers import timing as timing_module
from d2lhelpers.timing import BenchmarkResult, Breakdown


class FakeClock:
    """Returns the given instants one by one and logs each read in a shared event list."""

    def __init__(self, instants, events=None):
        self.instants, self.events = list(instants), events if events is not None else []

    def __call__(self):
        self.events.append('clock')
        return self.instants.pop(0)


@pytest.mark.parametrize(
    'seconds, text',
    [
        (0.9999996, '1.000 s'),
        (-0.9999996, '-1.000 s'),
        (0.00099996, '1.000 ms'),
        (-0.00099996, '-1.000 ms'),
        (0.9999994, '999.999 ms'),  # just under the boundary once rounded: the smaller unit
        (0.00099994, '999.9 µs'),
        (1.0, '1.000 s'),
        (0.001, '1.000 ms'),
    ],
)
def test_format_seconds_at_unit_boundaries(seconds, text):
    assert format_seconds(seconds) == text


@pytest.fixture
def events(monkeypatch):
    """The order of sync / clock / fn events; the device sync is counted, not run."""
    log = []
    monkeypatch.setattr(timing_module, '_sync_devices', lambda: log.append('sync'))
    return log


def clock_for(durations, start=100.0):
    """Instants whose consecutive start/stop pairs are ``durations`` apart."""
    instants, t = [], start
    for d in durations:
        instants += [t, t + d]
        t += d + 1
    return instants


def bench_clock(durations):
    """The clock ``benchmark(number=k)`` reads: a start and a stop per timed run."""
    return clock_for(durations, start=500.0)


# --- benchmark with a fake clock -------------------------------------------------------------


def test_benchmark_exact_statistics(events):
    r = benchmark(
        lambda: None,
        repeats=5,
        warmup=0,
        number=1,
        flops=6e9,
        clock=FakeClock(bench_clock([1.0, 2.0, 3.0, 4.0, 10.0])),
    )
    assert (len(r.times), r.median, r.iqr, r.gflops) == (5, 3.0, 2.0, 2.0)
    assert (r.q1, r.q3, r.number) == (2.0, 4.0, 1)


def test_benchmark_divides_times_by_number(events):
    calls = []
    r = benchmark(
        lambda: calls.append(1),
        repeats=2,
        warmup=0,
        number=4,
        clock=FakeClock(bench_clock([8.0, 4.0])),
    )
    assert r.times == (2.0, 1.0) and len(calls) == 8


def test_benchmark_order_warmup_then_timed_runs(events):
    clock = FakeClock(bench_clock([1.0, 1.0]), events)
    benchmark(lambda: events.append('fn'), repeats=2, warmup=3, number=1, clock=clock)
    timed = ['sync', 'clock', 'fn', 'sync', 'clock']  # the devices waited for at both ends
    assert events == ['fn'] * 3 + timed * 2


def test_benchmark_without_sync_never_syncs(events):
    benchmark(
        lambda: None, repeats=3, number=1, sync=False, clock=FakeClock(bench_clock([1.0] * 3))
    )
    assert events == []


def test_benchmark_iqr_and_str_with_units():
    r = BenchmarkResult(times=(0.002, 0.004, 0.006), flops=2e9, label='matmul', nbytes=8e6)
    assert r.iqr == pytest.approx(0.002)
    assert str(r) == (
        'matmul: 4.000 ms ± 1.000 ms (trung vị ± nửa IQR, 3 lần đo), 500.0 GFLOP/s, 2.0 GB/s'
    )


def test_a_single_run_has_zero_spread_and_no_throughput_without_work():
    r = BenchmarkResult(times=(0.5,))
    assert (r.q1, r.q3, r.iqr, r.gflops, r.gbs) == (0.5, 0.5, 0.0, None, None)
    assert str(r) == '500.000 ms ± 0.0 µs (trung vị ± nửa IQR, 1 lần đo)'


@pytest.mark.parametrize(
    'median, floor, near',
    [(0.0001, 0.0001, True), (0.00015, 0.0001, True), (0.0002, 0.0001, False)],
)
def test_near_flags_a_result_within_one_and_a_half_floors(median, floor, near):
    r = BenchmarkResult(times=(median,))
    assert r.near(floor) is near
    assert r.near(BenchmarkResult(times=(floor,))) is near


def test_autorange_picks_the_smallest_number_reaching_min_run_time(events):
    # trial runs of 1, 2, 5, 10 calls last 1, 2, 5, 10 ms; 10 calls reach 10 ms first
    trials = clock_for([0.001, 0.002, 0.005, 0.010])
    calls = []
    r = benchmark(
        lambda: calls.append(1),
        repeats=3,
        warmup=0,
        number=None,
        min_run_time=0.01,
        clock=FakeClock([*trials, *clock_for([0.02, 0.03, 0.04])]),
    )
    assert r.number == 10
    assert len(calls) == (1 + 2 + 5 + 10) + 3 * 10  # trials are untimed warm-ups
    assert r.times == pytest.approx((0.002, 0.003, 0.004))


def test_autorange_stops_at_a_million_calls(events, monkeypatch):
    monkeypatch.setattr(timing_module, '_MAX_NUMBER', 5)
    r = benchmark(lambda: None, repeats=1, warmup=0, sync=False, clock=lambda: 0.0)
    assert r.number == 5


# --- bad arguments ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    'kwargs, error, match',
    [
        ({'repeats': 0}, ValueError, '`repeats` phải >= 1'),
        ({'repeats': 1.5}, TypeError, '`repeats` phải là số nguyên'),
        ({'repeats': True}, TypeError, '`repeats`'),
        ({'warmup': -1}, ValueError, '`warmup`'),
        ({'number': 0}, ValueError, '`number`'),
        ({'min_run_time': 0}, ValueError, '`min_run_time`'),
        ({'min_run_time': math.inf}, ValueError, '`min_run_time`'),
        ({'min_run_time': math.nan}, ValueError, '`min_run_time`'),
        ({'min_run_time': 'fast'}, TypeError, '`min_run_time`'),
        ({'flops': 0}, ValueError, '`flops`'),
        ({'flops': math.inf}, ValueError, '`flops`'),
        ({'nbytes': -1}, ValueError, '`nbytes`'),
    ],
)
def test_benchmark_bad_argument_is_refused_before_anything_runs(kwargs, error, match):
    calls = []
    with pytest.raises(error, match=match):
        benchmark(lambda: calls.append(1), **kwargs)
    assert calls == []


@pytest.mark.parametrize('fn', [None, 5, 'tf.matmul'])
def test_benchmark_non_callable_is_a_type_error(fn):
    with pytest.raises(TypeError, match='`fn`'):
        benchmark(fn)


# --- real devices ------------------------------------------------------------------------------


def _has_gpu(tf) -> bool:
    return bool(tf.config.list_physical_devices('GPU'))


@pytest.fixture
def gpu_tf(tf):
    """TensorFlow, on a machine with a GPU; else the test is skipped."""
    if not _has_gpu(tf):
        pytest.skip('needs a GPU: timings on a CPU are synchronous')
    return tf


def matmul_on(device: str, n: int):
    import tensorflow as tf

    with tf.device(device):
        a = tf.random.stateless_normal((n, n), seed=(1, 2))
        b = tf.random.stateless_normal((n, n), seed=(3, 4))

    def fn():
        with tf.device(device):
            return tf.matmul(a, b)

    return fn


@pytest.fixture
def no_tf32(tf):
    before = tf.config.experimental.tensor_float_32_execution_enabled()
    tf.config.experimental.enable_tensor_float_32_execution(False)
    yield
    tf.config.experimental.enable_tensor_float_32_execution(before)


@pytest.mark.gpu
def test_gpu_timing_is_synchronised(gpu_tf, no_tf32, report_figure):
    # Without the syncs, the clock measures how fast Python queues kernels: far below the real
    # time, and a throughput above the GPU's own peak.
    n = 4096
    fn = matmul_on('/GPU:0', n)
    synced = benchmark(fn, flops=2 * n**3)
    unsynced = benchmark(fn, flops=2 * n**3, sync=False, number=1)
    gpu = gpu_tf.config.list_physical_devices('GPU')[0]
    name = gpu_tf.config.experimental.get_device_details(gpu)
    spec = find_spec(name.get('device_name'))
    report_figure(f'GPU float32 n={n}: {synced}; sync=False: {unsynced}')
    assert unsynced.median < 0.5 * synced.median
    if spec is not None:
        assert synced.gflops < 1.2 * 1e3 * spec.fp32_tflops, (synced, spec)


@pytest.mark.gpu
def test_gpu_dispatch_bound_point_is_flagged(gpu_tf, no_tf32):
    # A 16x16 matmul on a GPU finishes long before Python dispatches the next one: its time is
    # the dispatch floor. A 4096x4096 one takes milliseconds: far above it.
    floor = benchmark(matmul_on('/GPU:0', 1))
    assert benchmark(matmul_on('/GPU:0', 16)).near(floor)
    assert not benchmark(matmul_on('/GPU:0', 4096)).near(floor)


@pytest.mark.timing
def test_matmul_median_agrees_with_independent_measurement(tf, no_tf32, report_figure):
    """benchmark() against perf_counter around calls that wait for a scalar reduction.

    The reference waits with ``tf.reduce_sum(...).numpy()``: it copies 4 bytes, not the n x n
    result. TF32 is off and, on a GPU, n = 4096, so that both sides time the kernel (a float32
    4096^3 matmul takes milliseconds even on an H200) rather than the fixed costs around it.
    """
    on_gpu = _has_gpu(tf)
    n, rounds, per_round = (4096 if on_gpu else 1000), 20, 3
    fn = matmul_on('/GPU:0' if on_gpu else '/CPU:0', n)
    ours, plain = [], []

    def measure_ours():
        ours.extend(benchmark(fn, repeats=per_round, warmup=0, number=1).times)

    def measure_plain():
        for _ in range(per_round):
            t0 = time.perf_counter()
            tf.reduce_sum(fn()).numpy()
            plain.append(time.perf_counter() - t0)

    for _ in range(3):
        tf.reduce_sum(fn()).numpy()
    for r in range(rounds):  # interleaved, alternating which goes first
        first, second = (
            (measure_ours, measure_plain) if r % 2 == 0 else (measure_plain, measure_ours)
        )
        first()
        second()
    ratio = statistics.median(ours) / statistics.median(plain)
    load = os.getloadavg()[0] if hasattr(os, 'getloadavg') else float('nan')
    figures = (
        f'matmul {n}x{n} float32, {len(ours)} + {len(plain)} lần đo xen kẽ, tải máy {load:.2f}: '
        f'benchmark() {statistics.median(ours) * 1e3:.3f} ms, perf_counter + reduce_sum '
        f'{statistics.median(plain) * 1e3:.3f} ms, tỉ số {ratio:.3f} (cho phép 0.9-1.1)'
    )
    report_figure(figures)
    assert 0.9 <= ratio <= 1.1, figures


# --- compare: the one verdict rule -------------------------------------------------------------


def result(*times, label=''):
    return BenchmarkResult(tuple(times), label=label)


def test_a_clear_win_beyond_the_band_and_outside_the_noise():
    fast, slow = (
        result(1.0, 1.01, 0.99, 1.0, 1.02, label='a'),
        result(2.0, 2.02, 1.98, 2.0, 2.01, label='b'),
    )
    c = compare(fast, slow)
    assert (c.kind, round(c.speedup, 2)) == ('faster', 2.0)
    assert str(c) == 'a so với b: nhanh hơn (tỉ số thời gian 0.50x, khoảng 0.50x–0.51x theo IQR)'
    assert compare(slow, fast).kind == 'slower'
    assert str(compare(slow, fast)).startswith('b so với a: chậm hơn (tỉ số thời gian 2.00x, ')


def test_a_difference_inside_the_band_is_a_tie():
    c = compare(result(1.0, 1.0, 1.0), result(1.05, 1.05, 1.05))
    assert c.kind == 'tie'
    assert str(c) == 'a so với b: ngang nhau (tỉ số thời gian 0.95x, khoảng 0.95x–0.95x theo IQR)'


def test_a_large_median_difference_inside_overlapping_spreads_is_a_tie():
    # medians 1.0 vs 1.5 (beyond the band), but the runs overlap: noise, not a win
    noisy_a = result(0.6, 0.8, 1.0, 1.6, 1.7)
    noisy_b = result(0.9, 1.2, 1.5, 1.8, 2.2)
    assert compare(noisy_a, noisy_b).kind == 'tie'
    assert compare(noisy_b, noisy_a).kind == 'tie'


@pytest.mark.parametrize('a, b, name', [(1.0, result(1.3), 'a'), (result(1.0), 1.3, 'b')])
def test_plain_seconds_are_refused_they_have_no_spread(a, b, name):
    with pytest.raises(TypeError, match=f'tham số `{name}` phải là kết quả của benchmark'):
        compare(a, b)


def test_the_band_is_tie_band_for_every_caller():
    assert compare(result(1.0), result(1.09)).kind == 'tie'  # 1.09x: inside TIE_BAND = 1.1
    assert compare(result(1.0), result(1.11)).kind == 'faster'


def test_interleave_alternates_the_order_of_the_rounds(events):
    calls = []
    fns = {'a': lambda: calls.append('a'), 'b': lambda: calls.append('b')}
    results = interleave(fns, rounds=3, number=1, warmup=0, sync=False)
    assert calls == ['a', 'b', 'a', 'b', 'b', 'a', 'a', 'b']  # first runs, then a-b, b-a, a-b
    assert [len(r.times) for r in results.values()] == [3, 3] and results['a'].label == 'a'


def test_interleave_refuses_what_is_not_a_dict_of_functions():
    with pytest.raises(TypeError, match='`fns`'):
        interleave({'a': 5})


# --- breakdown: a time is fixed cost plus work --------------------------------------------------


@pytest.mark.parametrize(
    ('times_floor', 'share', 'dominant'),
    [
        (2.23, '45%', 'tính toán'),  # choose-a-gpu's n = 128: over 40% of it is still fixed cost
        (1.55, '65%', 'chi phí cố định'),  # exercise 3's eager loop: mostly dispatch
        (1.0, '100%', 'chi phí cố định'),
        (1000.0, '0%', 'tính toán'),
    ],
)
def test_breakdown_splits_a_time_into_fixed_cost_and_work(times_floor, share, dominant):
    floor = BenchmarkResult((1e-4,) * 3)
    work_s = (times_floor - 1) * 1e-4
    result = BenchmarkResult((times_floor * 1e-4,) * 3, flops=work_s * 1e9 or None)
    b = result.breakdown(floor, compute=1.0)  # 1 GFLOP/s above the floor: at the ceiling
    assert b.floor_share == pytest.approx(1 / times_floor)
    work = 'tính toán' if work_s else 'công việc'
    assert str(b) == (
        f'{times_floor:.2f}x mức sàn: chi phí cố định {share}, {work} '
        f'{100 - int(share[:-1])}% thời gian; trội: {dominant}'
    )


def test_breakdown_never_gives_the_floor_more_than_the_whole_time():
    b = BenchmarkResult((1e-4,), nbytes=1e6).breakdown(2e-4, bandwidth=10.0)  # a noisy floor
    assert b.floor_share == 1.0 and str(b).endswith('trội: chi phí cố định')
    assert str(b).startswith('0.50x mức sàn: chi phí cố định 100%')
    assert b.work is None  # no time above the floor: no rate to name it by


def test_breakdown_names_the_work_only_within_a_factor_of_two_of_a_measured_ceiling():
    r = BenchmarkResult((1.1,), nbytes=10e9, flops=100e9)  # 1 s above a 0.1 s floor
    assert str(r.breakdown(0.1)).endswith('công việc 91% thời gian; trội: công việc')
    assert r.breakdown(0.1, bandwidth=10.0).work == 'memory'  # 10 GB/s at a 10 GB/s ceiling
    assert r.breakdown(0.1, bandwidth=20.0).work == 'memory'  # half the ceiling: still within
    assert r.breakdown(0.1, bandwidth=20.1).work is None  # below half of it
    assert r.breakdown(0.1, bandwidth=4.9).work is None  # faster than twice it: a cache, not DRAM
    assert str(r.breakdown(0.1, compute=100.0)).endswith('trội: tính toán')
    assert r.breakdown(0.1, compute=1000.0).work is None
    assert BenchmarkResult((1.1,)).breakdown(0.1, bandwidth=10.0).work is None  # bytes not given


@pytest.mark.parametrize(
    ('case', 'median_s', 'floor_s', 'amount', 'ceiling'),
    [
        # exercise 2, write on the device: 2.82 MB in 260 µs above the floor = 10.8 GB/s, where
        # choose-a-gpu measured 69.8 GB/s on the same machine: not bandwidth
        ('ex2', 691.6e-6, 431.1e-6, {'nbytes': 235_146 * 12}, {'bandwidth': 69.8}),
        # data-parallel, 2 replicas: the compute of a step is that of 1 replica (8.5 ms above its
        # floor); nothing measured a compute ceiling, so the 13.3 ms are only work
        ('data-parallel', 15.096e-3, 1.767e-3, {'flops': 6 * 99_073 * 512}, {}),
        # choose-a-gpu, n = 16: 3 KB in cache, against the 69.8 GB/s of a 64 MiB array
        ('choose-a-gpu', 25.6e-6, 22.3e-6, {'nbytes': 3 * 16 * 16 * 4}, {'bandwidth': 69.8}),
    ],
)
def test_the_reviews_three_breakdowns_are_only_work(case, median_s, floor_s, amount, ceiling):
    b = Breakdown.of(median_s, floor_s, **amount, **ceiling)
    assert b.work is None and 'công việc' in str(b), case
    assert 'băng thông bộ nhớ' not in str(b) and 'tính toán' not in str(b)


def test_scaled_multiplies_every_time_and_keeps_the_spread_relative():
    r = BenchmarkResult((1.0, 2.0, 3.0), flops=1e9, label='a', number=4)
    s = r.scaled(0.5)
    assert s.times == (0.5, 1.0, 1.5) and (s.label, s.number, s.flops) == ('a', 4, 1e9)
    assert (s.q1, s.q3) == (r.q1 * 0.5, r.q3 * 0.5)
    with pytest.raises(ValueError, match='`factor`'):
        r.scaled(0)
