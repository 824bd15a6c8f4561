"""Timing that tells the truth about asynchronous devices.

Taught in ``exercises/01-cpu-vs-gpu-matmul.ipynb``; used by every notebook that measures time.

A GPU runs the ops that Python queued *later*: a clock read right after ``tf.matmul`` returns
measures how fast Python queued the work, not how fast the GPU did it. So ``benchmark`` waits for
every device (``tf.test.experimental.sync_devices()``) before it starts and before it stops the
clock, runs untimed warm-up calls first (the first call traces, allocates and autotunes), repeats,
and reports the median and the spread rather than one number.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import tensorflow as tf

from ._checks import check_int

__all__ = ['sync_devices', 'Timer', 'benchmark', 'BenchmarkResult', 'format_seconds']


def sync_devices() -> None:
    """Wait until every device has finished the work queued so far (eager mode only)."""
    tf.test.experimental.sync_devices()


class Timer:
    """A stopwatch that synchronises the devices at ``start`` and ``stop``.

    >>> t = Timer(); t.start(); ...; t.stop()     # returns the seconds of that interval
    >>> with Timer() as t: ...                     # or as a context manager: t.times[-1]

    ``clock`` is a parameter so tests can pass a fake one; ``sync=False`` skips the device sync
    (only for code that has already synchronised, e.g. by calling ``.numpy()``).
    """

    def __init__(self, clock: Callable[[], float] = time.perf_counter, sync: bool = True) -> None:
        self.clock, self.sync, self.times = clock, sync, []
        self._t0: float | None = None

    def start(self) -> None:
        if self.sync:
            sync_devices()
        self._t0 = self.clock()

    def stop(self) -> float:
        if self._t0 is None:
            raise RuntimeError('Timer.stop() called before Timer.start()')
        if self.sync:
            sync_devices()
        self.times.append(self.clock() - self._t0)
        self._t0 = None
        return self.times[-1]

    def __enter__(self) -> Timer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def sum(self) -> float:
        return sum(self.times)


@dataclass(frozen=True)
class BenchmarkResult:
    """Seconds per call of ``runs`` timed runs; ``flops`` is the work of one call, if given."""

    times: tuple[float, ...]
    flops: float | None = None
    label: str = ''

    @property
    def runs(self) -> int:
        return len(self.times)

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def min(self) -> float:
        return min(self.times)

    @property
    def max(self) -> float:
        return max(self.times)

    @property
    def iqr(self) -> float:
        """Interquartile range: the middle half of the runs spans this many seconds."""
        if self.runs < 2:
            return 0.0
        q = statistics.quantiles(self.times, n=4, method='inclusive')
        return q[2] - q[0]

    @property
    def spread(self) -> float:
        """IQR relative to the median (0.05 = the middle half of the runs lie within 5%)."""
        return self.iqr / self.median if self.median > 0 else 0.0

    @property
    def gflops(self) -> float | None:
        """Throughput at the median time, in 10^9 floating-point operations per second."""
        return None if self.flops is None else self.flops / self.median / 1e9

    def __str__(self) -> str:
        text = (
            f'{self.label + ": " if self.label else ""}{format_seconds(self.median)} ± '
            f'{format_seconds(self.iqr / 2)} (trung vị ± nửa IQR, {self.runs} lần đo)'
        )
        if self.gflops is not None:
            text += f', {self.gflops:.1f} GFLOP/s'
        return text

    def _repr_pretty_(self, p, cycle) -> None:
        p.text(str(self))

    def as_dict(self) -> dict[str, Any]:
        return {
            'label': self.label,
            'median_s': self.median,
            'iqr_s': self.iqr,
            'runs': self.runs,
            'min_s': self.min,
            'max_s': self.max,
            'gflops': self.gflops,
        }


def format_seconds(s: float) -> str:
    """A duration with a readable unit: ``1.234 s``, ``4.567 ms``, ``12.3 µs``.

    Every notebook prints its timings with it, so ``tests/sanitize.cfg`` masks exactly them.
    """
    if s >= 1:
        return f'{s:.3f} s'
    if s >= 1e-3:
        return f'{s * 1e3:.3f} ms'
    return f'{s * 1e6:.1f} µs'


def _autorange(fn: Callable[[], Any], min_run_time: float, timer: Timer) -> int:
    """The smallest ``number`` in 1, 2, 5, 10, 20, 50, ... whose run lasts ``min_run_time``.

    Like ``timeit.Timer.autorange``; each trial run is itself an untimed warm-up.
    """
    base = 1
    while True:
        for k in (1, 2, 5):
            number = base * k
            timer.start()
            for _ in range(number):
                fn()
            if timer.stop() >= min_run_time or number >= 10**7:
                timer.times.clear()
                return number
        base *= 10


def benchmark(
    fn: Callable[[], Any],
    *,
    repeats: int = 5,
    warmup: int = 1,
    number: int | None = 1,
    min_run_time: float = 0.02,
    flops: float | None = None,
    label: str = '',
    sync: bool = True,
    clock: Callable[[], float] = time.perf_counter,
) -> BenchmarkResult:
    """Time ``fn()`` honestly and return a ``BenchmarkResult`` (seconds per call).

    ``warmup`` untimed calls come first. Then ``repeats`` timed runs, each of ``number`` calls
    between two device synchronisations. A call shorter than the clock's resolution or the sync's
    own cost (~10 µs) needs several calls per run: ``number=None`` picks the smallest of 1, 2, 5,
    10, ... whose run lasts at least ``min_run_time`` seconds. Report the median: unlike the mean,
    one run slowed by the operating system does not move it; the IQR says how much the runs
    disagree.

    ``sync=False`` is for work that is synchronous anyway (NumPy): waking TensorFlow's devices
    there only adds noise, since their threads then compete with NumPy's BLAS for the cores.
    """
    if not callable(fn):
        raise TypeError(f'`fn` must be callable, got {fn!r}')
    repeats = check_int('repeats', repeats, 1)
    warmup = check_int('warmup', warmup, 0)
    if number is not None:
        number = check_int('number', number, 1)
    if (
        isinstance(min_run_time, bool)
        or not isinstance(min_run_time, (int, float))
        or not min_run_time > 0
    ):
        raise ValueError(
            f'`min_run_time` must be a positive number of seconds, got {min_run_time!r}'
        )
    if flops is not None and (
        isinstance(flops, bool) or not isinstance(flops, (int, float)) or flops <= 0
    ):
        raise ValueError(f'`flops` must be a positive number or None, got {flops!r}')
    for _ in range(warmup):
        fn()
    timer = Timer(clock=clock, sync=sync)
    if number is None:
        number = _autorange(fn, min_run_time, timer)
    for _ in range(repeats):
        timer.start()
        for _ in range(number):
            fn()
        timer.stop()
    return BenchmarkResult(times=tuple(t / number for t in timer.times), flops=flops, label=label)
