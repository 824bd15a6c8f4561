"""Timing that tells the truth about asynchronous devices, and the one rule for comparing timings.

A GPU runs the ops Python queued *later*, so a clock read right after ``tf.matmul`` returns
measures Python, not the GPU. ``benchmark`` therefore waits for every device before it starts and
before it stops the clock, runs untimed warm-up calls (the first call traces, allocates and
autotunes), puts enough calls in each timed run that the sync and the clock are small beside them
(``number=None``), repeats, and reports the median and the IQR.

A measured time adds up: time ≈ fixed cost + max(memory time, compute time). The fixed cost (the
floor: dispatching an op and timing it) is measured by timing a trivial op the same way (``floor =
benchmark(tiny_op)``); ``result.breakdown(floor)`` and ``result.near(floor)`` judge a time by it.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from .checks import check_int, check_number

#: A median within this factor of the floor measured the fixed cost, not the work.
NEAR_FLOOR = 1.5
#: Two timings closer than this factor are a tie, whatever their spreads.
TIE_BAND = 1.1
#: A part above the floor is named after a ceiling only if its rate is within this factor of it.
CEILING_FACTOR = 2.0
#: The parts of a measured time, as ``Breakdown`` prints them.
FIXED = 'chi phí cố định'
WORK = {'compute': 'tính toán', 'memory': 'băng thông bộ nhớ', None: 'công việc'}


def format_seconds(s: float) -> str:
    """A duration with a readable unit: ``1.234 s``, ``4.567 ms``, ``12.3 µs`` (also ``-4.567 ms``:
    the unit follows the size, whatever the sign)."""
    if abs(s) >= 1 or abs(round(s * 1e3, 3)) >= 1000:  # 0.9999996 s would print 1000.000 ms
        return f'{s:.3f} s'
    if abs(s) >= 1e-3 or abs(round(s * 1e6, 1)) >= 1000:
        return f'{s * 1e3:.3f} ms'
    return f'{s * 1e6:.1f} µs'


def _quartiles(times: tuple[float, ...]) -> list[float]:
    if len(times) < 2:
        return [*times] * 2
    return statistics.quantiles(times, n=4, method='inclusive')[::2]


@dataclass(frozen=True, repr=False)
class BenchmarkResult:
    """Seconds per call of each timed run; ``flops``/``nbytes``: the work of one call;
    ``number``: calls per run."""

    times: tuple[float, ...]
    flops: float | None = None
    label: str = ''
    number: int = 1
    nbytes: float | None = None

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def q1(self) -> float:  # first quartile: a quarter of the runs were faster
        return _quartiles(self.times)[0]

    @property
    def q3(self) -> float:
        return _quartiles(self.times)[1]

    @property
    def iqr(self) -> float:
        """Interquartile range: the middle half of the runs spans this many seconds."""
        return self.q3 - self.q1

    @property
    def gflops(self) -> float | None:
        """Throughput at the median, in 10^9 floating-point operations per second."""
        return None if self.flops is None else self.flops / self.median / 1e9

    @property
    def gbs(self) -> float | None:
        """Bytes moved per second at the median, in 10^9 bytes per second."""
        return None if self.nbytes is None else self.nbytes / self.median / 1e9

    def near(self, floor: BenchmarkResult | float) -> bool:
        """True if the median is within ``NEAR_FLOOR`` times ``floor`` (a result or seconds)."""
        floor_s = floor.median if isinstance(floor, BenchmarkResult) else float(floor)
        return self.median <= NEAR_FLOOR * floor_s

    def breakdown(self, floor: BenchmarkResult | float, **ceilings: float) -> Breakdown:
        """``Breakdown.of`` this median above ``floor`` (a result or seconds), with this result's
        bytes and FLOPs; ``ceilings``: ``bandwidth`` (GB/s), ``compute`` (GFLOP/s), measured."""
        floor_s = floor.median if isinstance(floor, BenchmarkResult) else floor
        return Breakdown.of(self.median, floor_s, nbytes=self.nbytes, flops=self.flops, **ceilings)

    def scaled(self, factor: float) -> BenchmarkResult:
        """The same runs with every time times ``factor`` (e.g. per byte of a larger array)."""
        factor = check_number('factor', factor, minimum=0, strict=True)
        return replace(self, times=tuple(t * factor for t in self.times))

    def __str__(self) -> str:
        text = (
            f'{self.label + ": " if self.label else ""}{format_seconds(self.median)} ± '
            f'{format_seconds(self.iqr / 2)} (trung vị ± nửa IQR, {len(self.times)} lần đo)'
        )
        if self.gflops is not None:
            text += f', {self.gflops:.1f} GFLOP/s'
        if self.gbs is not None:
            text += f', {self.gbs:.1f} GB/s'
        return text

    __repr__ = __str__


@dataclass(frozen=True, repr=False)
class Breakdown:
    """A median as fixed cost plus work: ``floor_share`` of it is the floor (the same call on a
    trivial input), the rest is work. The part that dominates is the larger one: no label at a
    threshold, the shares add up to the time. ``work`` names the rest only when a measurement
    says what it is (``Breakdown.of``): ``'memory'``, ``'compute'`` or None (just work)."""

    median_s: float
    floor_s: float
    work: str | None = None

    @classmethod
    def of(
        cls,
        median_s: float,
        floor_s: float,
        *,
        nbytes: float | None = None,
        flops: float | None = None,
        bandwidth: float | None = None,
        compute: float | None = None,
    ) -> Breakdown:
        """The time above the floor is memory traffic if ``nbytes`` moved in it run within
        ``CEILING_FACTOR`` of ``bandwidth`` (GB/s, measured), compute if ``flops`` run within it
        of ``compute`` (GFLOP/s, measured); otherwise nothing measured says what it is, and it is
        only work. A part whose rate is far from every ceiling (a tiny array in a cache, a step
        that waits on other replicas) is not named after a ceiling it does not touch."""
        work_s = median_s - check_number('floor', floor_s, minimum=0)
        named = None
        for kind, amount, ceiling in (('memory', nbytes, bandwidth), ('compute', flops, compute)):
            if amount and ceiling and work_s > 0:
                rate = amount / work_s / 1e9
                if ceiling / CEILING_FACTOR <= rate <= ceiling * CEILING_FACTOR:
                    named = kind
        return cls(median_s, floor_s, named)

    @property
    def floor_share(self) -> float:
        return min(1.0, self.floor_s / self.median_s)

    def __str__(self) -> str:
        share = self.floor_share
        dominant = FIXED if share >= 0.5 else WORK[self.work]
        return (
            f'{self.median_s / self.floor_s:.2f}x mức sàn: {FIXED} {share:.0%}, {WORK[self.work]} '
            f'{1 - share:.0%} thời gian; trội: {dominant}'
        )

    __repr__ = __str__


@dataclass(frozen=True, repr=False)
class Comparison:
    """``a`` against ``b``: ``ratio`` = time of a / time of b (``low``..``high`` from the IQRs);
    ``kind``: ``'faster'``, ``'slower'`` or ``'tie'`` (a relative to b); ``speedup`` = 1/ratio."""

    a: str
    b: str
    ratio: float
    low: float
    high: float

    @property
    def speedup(self) -> float:
        return 1 / self.ratio

    @property
    def kind(self) -> str:
        if self.high < 1 and self.speedup > TIE_BAND:
            return 'faster'
        if self.low > 1 and self.ratio > TIE_BAND:
            return 'slower'
        return 'tie'

    def __str__(self) -> str:  # one shape for every verdict: only the verdict word changes
        verdict = {'faster': 'nhanh hơn', 'slower': 'chậm hơn', 'tie': 'ngang nhau'}[self.kind]
        return (
            f'{self.a} so với {self.b}: {verdict} (tỉ số thời gian {self.ratio:.2f}x, '
            f'khoảng {self.low:.2f}x–{self.high:.2f}x theo IQR)'
        )

    __repr__ = __str__

    def as_dict(self) -> dict[str, Any]:
        return {'ratio': self.ratio, 'low': self.low, 'high': self.high, 'kind': self.kind}


def compare(
    a: BenchmarkResult,
    b: BenchmarkResult,
    *,
    names: tuple[str, str] | None = None,
) -> Comparison:
    """The one verdict rule: ``a`` faster than, slower than, or tied with ``b``? A win needs a
    median ratio beyond ``TIE_BAND`` and no overlap of the IQRs; else a tie. Both must be results
    of ``benchmark``: a bare number of seconds has no spread to judge a tie by."""
    for name, x in (('a', a), ('b', b)):
        if not isinstance(x, BenchmarkResult):
            raise TypeError(f'tham số `{name}` phải là kết quả của benchmark, nhận được {x!r}')
    if names is None:
        names = (a.label or 'a', b.label or 'b')
    return Comparison(names[0], names[1], a.median / b.median, a.q1 / b.q3, a.q3 / b.q1)


def _sync_devices() -> None:
    """Wait until every device has finished the work queued so far (eager mode only)."""
    import tensorflow as tf

    tf.test.experimental.sync_devices()


def _timed_run(fn: Callable[[], Any], number: int, clock: Callable[[], float], sync: bool) -> float:
    """Seconds taken by ``number`` calls of ``fn``, the devices waited for before each clock read
    (``sync``): work queued before the run is not counted, work queued by it is."""
    if sync:
        _sync_devices()
    start = clock()
    for _ in range(number):
        fn()
    if sync:
        _sync_devices()
    return clock() - start


_MAX_NUMBER = 10**6


def _autorange(fn: Callable[[], Any], min_run_time: float, clock, sync: bool) -> int:
    """The smallest of 1, 2, 5, 10, 20, ... calls whose run lasts ``min_run_time`` (as timeit)."""
    base = 1
    while True:
        for k in (1, 2, 5):
            number = base * k
            if _timed_run(fn, number, clock, sync) >= min_run_time or number >= _MAX_NUMBER:
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

    ``warmup`` untimed calls, then ``repeats`` timed runs of ``number`` calls each between two
    device syncs; ``number=None`` picks it so that a run lasts ``min_run_time``. ``sync=False``
    for work that is synchronous anyway (NumPy): waking TensorFlow's devices there adds noise.
    """
    if not callable(fn):
        raise TypeError(f'tham số `fn` phải là một hàm gọi được, nhận được {fn!r}')
    repeats = check_int('repeats', repeats, 1)
    warmup = check_int('warmup', warmup, 0)
    if number is not None:
        number = check_int('number', number, 1)
    min_run_time = check_number('min_run_time', min_run_time, minimum=0, strict=True)
    flops = None if flops is None else check_number('flops', flops, minimum=0, strict=True)
    nbytes = None if nbytes is None else check_number('nbytes', nbytes, minimum=0, strict=True)
    for _ in range(warmup):
        fn()
    if number is None:
        number = _autorange(fn, min_run_time, clock, sync)
    times = tuple(_timed_run(fn, number, clock, sync) / number for _ in range(repeats))
    return BenchmarkResult(times, flops, label, number, nbytes)


def interleave(
    fns: Mapping[str, Callable[[], Any]],
    *,
    rounds: int = 5,
    flops: float | Mapping[str, float] | None = None,
    **options: Any,
) -> dict[str, BenchmarkResult]:
    """Benchmark several functions in alternating rounds, so a slow spell hits all of them.

    Each function first gets its own ``number`` (as ``benchmark``); then each round times every
    function once, in the given order in even rounds and reversed in odd ones. ``options`` go to
    ``benchmark`` (``sync``, ``min_run_time``, ``warmup``...). Returns ``{name: result}``.
    """
    if not fns or not all(callable(f) for f in fns.values()):
        raise TypeError('tham số `fns` phải là một dict {tên: hàm gọi được} không rỗng')
    rounds = check_int('rounds', rounds, 1)
    work = flops if isinstance(flops, Mapping) else dict.fromkeys(fns, flops)
    first = {
        name: benchmark(fn, repeats=1, flops=work.get(name), label=name, **options)
        for name, fn in fns.items()
    }
    clock = options.get('clock', time.perf_counter)
    sync = options.get('sync', True)
    times: dict[str, list[float]] = {name: [] for name in fns}
    for r in range(rounds):
        for name in list(fns) if r % 2 == 0 else list(fns)[::-1]:
            number = first[name].number
            times[name].append(_timed_run(fns[name], number, clock, sync) / number)
    return {name: replace(res, times=tuple(times[name])) for name, res in first.items()}
