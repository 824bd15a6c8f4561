"""d2lhelpers.timing: Timer and benchmark with a fake clock, bad arguments, and one real check.

The real check times a 1000x1000 float32 matmul with ``benchmark`` and, independently, with a
plain ``perf_counter`` around calls synchronised by ``.numpy()``, interleaved in the same process;
the medians must agree within 10%. Both figures are printed in the terminal summary.
"""

from __future__ import annotations

import os
import statistics
import time

import pytest
import tensorflow as tf

from d2lhelpers import BenchmarkResult, Timer, benchmark, sync_devices
from d2lhelpers import timing as timing_module


class FakeClock:
    """Returns the given instants one by one and logs each read in a shared event list."""

    def __init__(self, instants, events=None):
        self.instants, self.events = list(instants), events if events is not None else []

    def __call__(self):
        self.events.append('clock')
        return self.instants.pop(0)


@pytest.fixture
def events(monkeypatch):
    """The order of sync / clock / fn events; sync_devices is counted, not run."""
    log = []
    monkeypatch.setattr(timing_module, 'sync_devices', lambda: log.append('sync'))
    return log


def clock_for(durations):
    """A clock whose consecutive start/stop pairs are ``durations`` apart."""
    instants, t = [], 100.0
    for d in durations:
        instants += [t, t + d]
        t += d + 1
    return instants


# --- sync_devices ----------------------------------------------------------------------------


def test_sync_devices_runs_in_eager_mode():
    sync_devices()


def test_sync_devices_calls_tensorflow_sync(monkeypatch):
    calls = []
    monkeypatch.setattr(tf.test.experimental, 'sync_devices', lambda: calls.append(1))
    sync_devices()
    assert calls == [1]


# --- Timer -----------------------------------------------------------------------------------


def test_timer_stop_before_start_is_a_runtime_error():
    with pytest.raises(RuntimeError, match='before Timer.start'):
        Timer().stop()


def test_timer_returns_the_interval(events):
    t = Timer(clock=FakeClock([1.0, 3.5]))
    t.start()
    assert t.stop() == 2.5 and t.times == [2.5]


def test_timer_syncs_before_each_clock_read(events):
    t = Timer(clock=FakeClock([0.0, 1.0], events))
    t.start()
    t.stop()
    assert events == ['sync', 'clock', 'sync', 'clock']


def test_timer_without_sync_does_not_sync(events):
    t = Timer(clock=FakeClock([0.0, 1.0], events), sync=False)
    t.start()
    t.stop()
    assert events == ['clock', 'clock']


def test_timer_as_context_manager_and_sum(events):
    t = Timer(clock=FakeClock([0.0, 1.0, 5.0, 7.0]))
    with t:
        pass
    with t:
        pass
    assert t.times == [1.0, 2.0] and t.sum() == 3.0


def test_timer_cannot_stop_twice(events):
    t = Timer(clock=FakeClock([0.0, 1.0]))
    t.start()
    t.stop()
    with pytest.raises(RuntimeError):
        t.stop()


# --- benchmark with a fake clock -------------------------------------------------------------


def test_benchmark_exact_statistics(events):
    r = benchmark(
        lambda: None,
        repeats=5,
        warmup=0,
        flops=6e9,
        clock=FakeClock(clock_for([1.0, 2.0, 3.0, 4.0, 10.0])),
    )
    assert (r.runs, r.median, r.iqr, r.gflops) == (5, 3.0, 2.0, 2.0)
    assert (r.min, r.max) == (1.0, 10.0)


def test_benchmark_spread_is_iqr_over_median(events):
    r = benchmark(
        lambda: None, repeats=4, warmup=0, clock=FakeClock(clock_for([2.0, 2.0, 4.0, 4.0]))
    )
    assert r.median == 3.0 and r.iqr == 2.0 and r.spread == pytest.approx(2 / 3)


def test_benchmark_divides_by_number(events):
    calls = []
    r = benchmark(
        lambda: calls.append(1),
        repeats=2,
        warmup=0,
        number=4,
        clock=FakeClock(clock_for([8.0, 4.0])),
    )
    assert r.times == (2.0, 1.0) and len(calls) == 8


def test_benchmark_warmup_is_not_timed(events):
    clock = FakeClock(clock_for([1.0, 1.0]), events)
    benchmark(lambda: events.append('fn'), repeats=2, warmup=3, clock=clock)
    assert events == ['fn'] * 3 + ['sync', 'clock', 'fn', 'sync', 'clock'] * 2


def test_benchmark_syncs_at_start_and_stop_of_each_run(events):
    benchmark(lambda: None, repeats=3, warmup=1, clock=FakeClock(clock_for([1.0] * 3)))
    assert events.count('sync') == 6


def test_benchmark_without_sync(events):
    benchmark(lambda: None, repeats=3, sync=False, clock=FakeClock(clock_for([1.0] * 3)))
    assert events == []


def test_benchmark_single_run_has_zero_spread(events):
    r = benchmark(lambda: None, repeats=1, warmup=0, clock=FakeClock([0.0, 0.5]))
    assert (r.runs, r.median, r.iqr, r.spread) == (1, 0.5, 0.0, 0.0)


def test_benchmark_without_flops_has_no_gflops(events):
    r = benchmark(lambda: None, repeats=1, warmup=0, clock=FakeClock([0.0, 0.5]))
    assert r.gflops is None and 'GFLOP/s' not in str(r)


def test_benchmark_result_text_has_units_and_runs():
    r = BenchmarkResult(times=(0.002, 0.004, 0.006), flops=2e9, label='matmul')
    assert str(r) == 'matmul: 4.000 ms ± 1.000 ms (trung vị ± nửa IQR, 3 lần đo), 500.0 GFLOP/s'


@pytest.mark.parametrize(
    'seconds, text', [(1.5, '1.500 s'), (0.0123456, '12.346 ms'), (3.2e-6, '3.2 µs')]
)
def test_result_text_picks_the_unit(seconds, text):
    assert str(BenchmarkResult(times=(seconds,))).startswith(text + ' ± ')


def test_benchmark_result_as_dict():
    d = BenchmarkResult(times=(1.0, 3.0), flops=4e9, label='x').as_dict()
    assert d == {
        'label': 'x',
        'median_s': 2.0,
        'iqr_s': 1.0,
        'runs': 2,
        'min_s': 1.0,
        'max_s': 3.0,
        'gflops': 2.0,
    }


def test_benchmark_returns_fn_label(events):
    r = benchmark(lambda: None, repeats=1, label='a', clock=FakeClock([0.0, 1.0]))
    assert r.label == 'a'


# --- bad arguments ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    'kwargs, error, match',
    [
        ({'repeats': 0}, ValueError, '`repeats` must be >= 1'),
        ({'repeats': -3}, ValueError, '`repeats`'),
        ({'repeats': 1.5}, TypeError, '`repeats` must be an int'),
        ({'repeats': True}, TypeError, '`repeats`'),
        ({'warmup': -1}, ValueError, '`warmup`'),
        ({'warmup': '1'}, TypeError, '`warmup`'),
        ({'number': 0}, ValueError, '`number`'),
        ({'flops': 0}, ValueError, '`flops`'),
        ({'flops': -1e9}, ValueError, '`flops`'),
        ({'flops': '1e9'}, ValueError, '`flops`'),
    ],
)
def test_benchmark_bad_argument(kwargs, error, match):
    calls = []
    with pytest.raises(error, match=match):
        benchmark(lambda: calls.append(1), **kwargs)
    assert calls == []  # rejected before anything ran


@pytest.mark.parametrize('fn', [None, 5, 'tf.matmul'])
def test_benchmark_non_callable_is_a_type_error(fn):
    with pytest.raises(TypeError, match='`fn` must be callable'):
        benchmark(fn)


# --- agreement with an independent measurement (real clock, real TensorFlow) ------------------


def test_matmul_median_agrees_with_independent_measurement(report_figure):
    n, rounds, per_round = 1000, 20, 3
    a = tf.random.stateless_normal((n, n), seed=(1, 2))
    b = tf.random.stateless_normal((n, n), seed=(3, 4))

    def fn():
        return tf.matmul(a, b)

    def measure_ours():
        ours.extend(benchmark(fn, repeats=per_round, warmup=0, flops=2 * n**3).times)

    def measure_plain():
        for _ in range(per_round):
            t0 = time.perf_counter()
            fn().numpy()
            plain.append(time.perf_counter() - t0)

    for _ in range(3):  # warm both paths up once, outside any clock
        fn().numpy()
    ours, plain = [], []
    for r in range(rounds):  # interleaved, alternating which goes first: load changes hit both
        first, second = (
            (measure_ours, measure_plain) if r % 2 == 0 else (measure_plain, measure_ours)
        )
        first()
        second()
    m_ours, m_plain = statistics.median(ours), statistics.median(plain)
    ratio = m_ours / m_plain
    load = os.getloadavg()[0] if hasattr(os, 'getloadavg') else float('nan')
    figures = (
        f'matmul {n}x{n} float32, {len(ours)} + {len(plain)} runs xen kẽ, '
        f'tải máy (load avg 1 phút) {load:.2f}:\n'
        f'benchmark(): trung vị {m_ours * 1e3:.3f} ms '
        f'({2 * n**3 / m_ours / 1e9:.1f} GFLOP/s)\n'
        f'perf_counter + .numpy(): trung vị {m_plain * 1e3:.3f} ms\n'
        f'tỉ số {ratio:.3f} (cho phép 0.9-1.1)'
    )
    report_figure(figures)
    assert 0.9 <= ratio <= 1.1, figures


# --- number=None (autorange) and format_seconds ------------------------------------------------


def test_benchmark_autorange_picks_smallest_number_reaching_min_run_time(events):
    # trial runs of 1, 2, 5, 10 calls last 1, 2, 5, 10 ms; 10 calls reach 10 ms first
    trials = clock_for([0.001, 0.002, 0.005, 0.010])
    timed = clock_for([0.020, 0.030, 0.040])
    calls = []
    r = benchmark(
        lambda: calls.append(1),
        repeats=3,
        warmup=0,
        number=None,
        min_run_time=0.01,
        clock=FakeClock(trials + timed),
    )
    assert len(calls) == (1 + 2 + 5 + 10) + 3 * 10  # trials are untimed warm-ups
    assert r.times == pytest.approx((0.002, 0.003, 0.004))
    assert r.runs == 3


def test_benchmark_autorange_keeps_one_call_when_it_is_long_enough(events):
    r = benchmark(
        lambda: None,
        repeats=2,
        warmup=0,
        number=None,
        min_run_time=0.01,
        clock=FakeClock(clock_for([0.5, 0.25, 0.75])),
    )
    assert r.times == pytest.approx((0.25, 0.75))


@pytest.mark.parametrize('bad', [0, -1, True, 'fast', None])
def test_benchmark_refuses_bad_min_run_time(bad):
    with pytest.raises(ValueError, match='`min_run_time`'):
        benchmark(lambda: None, number=None, min_run_time=bad)


@pytest.mark.parametrize(
    'seconds, text', [(1.5, '1.500 s'), (0.0123456, '12.346 ms'), (0.0000123, '12.3 µs')]
)
def test_format_seconds(seconds, text):
    from d2lhelpers import format_seconds

    assert format_seconds(seconds) == text
