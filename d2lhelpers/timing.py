"""Timing that tells the truth about asynchronous devices.

Taught in ``exercises/01-cpu-vs-gpu-matmul.ipynb``; used by every notebook that measures time.

A GPU runs the ops that Python queued *later*: a clock read right after ``tf.matmul`` returns
measures how fast Python queued the work, not how fast the GPU did it. So ``benchmark`` waits for
every device (``tf.test.experimental.sync_devices()``) before it starts and before it stops the
clock, runs untimed warm-up calls first (the first call traces, allocates and autotunes), puts
enough calls in each timed run that the sync and the clock are small beside them, repeats, and
reports the median and the spread rather than one number.

Two costs are not the work and can hide it. The timing itself: an empty timed interval (two
syncs, two clock reads) costs a few µs on a CPU and ~80 µs on a GPU (measured on an H200);
``benchmark`` measures it and reports it per call as ``BenchmarkResult.overhead``. And dispatch:
each eager op costs ~10-100 µs of host time, so a GPU kernel that finishes sooner is invisible
behind it. Time a trivial op the same way (``floor = benchmark(tiny_op)``) and treat a result
with ``result.near(floor)`` as a measure of dispatch, not of the hardware.

Public API: ``sync_devices``, ``Timer``, ``benchmark`` (``BenchmarkResult`` is in ``results``).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from typing import Any

import tensorflow as tf

from .checks import check_int, check_seconds
from .results import BenchmarkResult

__all__ = ['sync_devices', 'Timer', 'benchmark']


def sync_devices() -> None:
    """Wait until every device has finished the work queued so far (eager mode only)."""
    tf.test.experimental.sync_devices()


class Timer:
    """A stopwatch like ``d2l.Timer`` that also waits for the devices at ``start`` and ``stop``.

    >>> timer = Timer()            # starts at once, as d2l's does
    >>> ...; timer.stop()          # seconds since the last start; kept in timer.times
    >>> timer.start(); ...; timer.stop()
    >>> timer.avg(), timer.sum(), timer.cumsum()
    >>> with Timer() as t: ...     # or as a context manager: t.times[-1]

    ``clock`` is a parameter so tests can pass a fake one; ``sync=False`` skips the device sync
    (only for code that has already synchronised, e.g. by calling ``.numpy()``, or for NumPy).
    """

    def __init__(self, clock: Callable[[], float] = time.perf_counter, sync: bool = True) -> None:
        self.clock, self.sync = clock, sync
        self.times: list[float] = []
        self.start()

    def start(self) -> None:
        """Start (or restart) the clock, once the devices are idle."""
        if self.sync:
            sync_devices()
        self.tik = self.clock()

    def stop(self) -> float:
        """Wait for the devices, record the seconds since the last ``start`` and return them."""
        if self.sync:
            sync_devices()
        self.times.append(self.clock() - self.tik)
        return self.times[-1]

    def avg(self) -> float:
        """The mean of the recorded times."""
        return sum(self.times) / len(self.times)

    def sum(self) -> float:
        """The sum of the recorded times."""
        return sum(self.times)

    def cumsum(self) -> list[float]:
        """The running sums of the recorded times (d2l plots epochs against them)."""
        total, sums = 0.0, []
        for t in self.times:
            total += t
            sums.append(total)
        return sums

    def __enter__(self) -> Timer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


_MAX_NUMBER = 10**6


def _autorange(fn: Callable[[], Any], min_run_time: float, timer: Timer) -> int:
    """The smallest ``number`` in 1, 2, 5, 10, 20, 50, ... whose run lasts ``min_run_time``.

    Like ``timeit.Timer.autorange``; each trial run is itself an untimed warm-up. Stops at
    10^6 calls per run (a call that takes no time at all, e.g. a Python no-op).
    """
    base = 1
    while True:
        for k in (1, 2, 5):
            number = base * k
            timer.start()
            for _ in range(number):
                fn()
            if timer.stop() >= min_run_time or number >= _MAX_NUMBER:
                return number
        base *= 10


def benchmark(
    fn: Callable[[], Any],
    *,
    repeats: int = 5,
    warmup: int = 1,
    number: int | None = None,
    min_run_time: float = 0.02,
    flops: float | None = None,
    nbytes: float | None = None,
    label: str = '',
    sync: bool = True,
    clock: Callable[[], float] = time.perf_counter,
) -> BenchmarkResult:
    """Time ``fn()`` honestly and return a ``BenchmarkResult`` (seconds per call).

    ``warmup`` untimed calls come first. Then ``repeats`` timed runs, each of ``number`` calls
    between two device synchronisations. ``number=None`` (the default) picks the smallest of
    1, 2, 5, 10, ... whose run lasts at least ``min_run_time`` seconds, so the sync and the clock
    (``overhead``, measured here on empty runs) are small beside the work. Report the median:
    unlike the mean, one run slowed by the operating system does not move it; the IQR says how
    much the runs disagree. ``flops``/``nbytes``: the work of one call, for GFLOP/s and GB/s.

    ``sync=False`` is for work that is synchronous anyway (NumPy): waking TensorFlow's devices
    there only adds noise, since their threads then compete with NumPy's BLAS for the cores.
    """
    if not callable(fn):
        raise TypeError(f'tham số `fn` phải là một hàm gọi được, nhận được {fn!r}')
    repeats = check_int('repeats', repeats, 1)
    warmup = check_int('warmup', warmup, 0)
    if number is not None:
        number = check_int('number', number, 1)
    min_run_time = check_seconds('min_run_time', min_run_time)
    for name, value in (('flops', flops), ('nbytes', nbytes)):
        if value is not None and (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not (math.isfinite(value) and value > 0)
        ):
            raise ValueError(
                f'tham số `{name}` phải là một số dương hoặc None, nhận được {value!r}'
            )
    for _ in range(warmup):
        fn()
    timer = Timer(clock=clock, sync=sync)
    if number is None:
        number = _autorange(fn, min_run_time, timer)
    timer.times.clear()
    for _ in range(repeats):
        timer.start()
        timer.stop()
    overhead = statistics.median(timer.times) / number
    timer.times.clear()
    for _ in range(repeats):
        timer.start()
        for _ in range(number):
            fn()
        timer.stop()
    return BenchmarkResult(
        times=tuple(t / number for t in timer.times),
        flops=flops,
        label=label,
        number=number,
        overhead=overhead,
        nbytes=nbytes,
    )
