"""What a measurement produces, how it reads, and how it is saved (TensorFlow-free).

Taught in ``exercises/01-cpu-vs-gpu-matmul.ipynb`` (``BenchmarkResult``, ``format_seconds``) and in
every measuring notebook's last cell (``save_results``). ``d2lhelpers.timing.benchmark`` returns a
``BenchmarkResult``; ``d2lhelpers.devices.env_report`` returns an ``EnvReport``. Both live here,
without TensorFlow, so the batch runner and its report can read them without importing it.

Public API: ``BenchmarkResult``, ``EnvReport``, ``format_seconds``, ``save_results``,
``atomic_write``.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ['BenchmarkResult', 'EnvReport', 'format_seconds', 'save_results', 'atomic_write']


def format_seconds(s: float) -> str:
    """A duration with a readable unit: ``1.234 s``, ``4.567 ms``, ``12.3 µs``.

    Every notebook prints its timings with it; ``tests/sanitize.cfg`` masks the number and keeps
    the unit, so a stored ``ms`` that became ``s`` still fails the check.
    """
    if s >= 1:
        return f'{s:.3f} s'
    if s >= 1e-3:
        return f'{s * 1e3:.3f} ms'
    return f'{s * 1e6:.1f} µs'


@dataclass(frozen=True)
class BenchmarkResult:
    """Seconds per call of ``runs`` timed runs, as ``d2lhelpers.benchmark`` measured them.

    ``flops`` (and ``nbytes``) are the work of one call, if given: ``gflops`` (``gbs``) are then
    the throughput at the median. ``number`` is how many calls each timed run made. ``overhead``
    is what the timing method itself costs per call (an empty timed interval: the device syncs and
    the clock reads, divided by ``number``): a median that is not far above it measured the timer,
    not the work.
    """

    times: tuple[float, ...]
    flops: float | None = None
    label: str = ''
    number: int = 1
    overhead: float | None = None
    nbytes: float | None = None

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

    @property
    def gbs(self) -> float | None:
        """Bytes moved per second at the median time, in 10^9 bytes per second (GB/s)."""
        return None if self.nbytes is None else self.nbytes / self.median / 1e9

    def near(self, floor: BenchmarkResult | float, factor: float = 1.5) -> bool:
        """True if the median is within ``factor`` times ``floor`` (a result or seconds per call).

        Use it to flag a point that measured a fixed cost (dispatching an op, syncing a device)
        rather than the work: such a point says nothing about the hardware's speed.
        """
        floor_s = floor.median if isinstance(floor, BenchmarkResult) else float(floor)
        return self.median <= factor * floor_s

    def __str__(self) -> str:
        text = (
            f'{self.label + ": " if self.label else ""}{format_seconds(self.median)} ± '
            f'{format_seconds(self.iqr / 2)} (trung vị ± nửa IQR, {self.runs} lần đo)'
        )
        if self.gflops is not None:
            text += f', {self.gflops:.1f} GFLOP/s'
        if self.gbs is not None:
            text += f', {self.gbs:.1f} GB/s'
        return text

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(str(self))

    def as_dict(self) -> dict[str, Any]:
        return {
            'label': self.label,
            'median_s': self.median,
            'iqr_s': self.iqr,
            'runs': self.runs,
            'number': self.number,
            'min_s': self.min,
            'max_s': self.max,
            'overhead_s': self.overhead,
            'gflops': self.gflops,
            'gbs': self.gbs,
        }


@dataclass
class EnvReport:
    """What TensorFlow sees on this machine; its text replaces ``!nvidia-smi``.

    ``gpus`` has one dict per logical GPU: ``device``, ``name``, ``compute_capability``,
    ``physical`` (the physical GPU it runs on), ``memory_total`` (of that physical GPU, from
    ``nvidia-smi``), ``memory_limit_mb`` (the cap of this logical device, ``None`` if not split),
    ``memory_current_mb`` and ``memory_peak_mb`` (what TensorFlow holds now and at most).
    """

    tensorflow: str
    keras: str
    numpy: str
    built_with_cuda: bool
    cuda: str | None
    cudnn: str | None
    physical: list[str]
    logical: list[str]
    tf32: bool | None = None
    gpus: list[dict] = field(default_factory=list)

    def __str__(self) -> str:
        cuda = (
            f'có (CUDA {self.cuda}, cuDNN {self.cudnn})'
            if self.built_with_cuda
            else 'không (chỉ chạy trên CPU)'
        )
        lines = [
            f'TensorFlow {self.tensorflow}, Keras {self.keras}, NumPy {self.numpy}',
            f'bản build có CUDA: {cuda}',
            'thiết bị vật lý: ' + ', '.join(self.physical),
            'thiết bị logic:  ' + ', '.join(self.logical),
        ]
        if self.tf32 is not None:
            lines.append(
                'TF32 cho phép nhân float32 (chỉ GPU từ Ampere trở lên): '
                + ('bật' if self.tf32 else 'tắt')
            )
        if not self.gpus:
            lines.append('GPU: không tìm thấy GPU nào')
        for g in self.gpus:
            limit = g.get('memory_limit_mb')
            lines.append(
                f'{g["device"]}: {g.get("name", "?")}, compute capability '
                f'{g.get("compute_capability", "?")}, GPU vật lý {g.get("physical", "?")} '
                f'({g.get("memory_total", "?")})'
                + (f', thiết bị logic giới hạn {limit:.0f} MB' if limit else '')
                + f', TF đang dùng {g["memory_current_mb"]:.0f} MB'
                f' (đỉnh {g["memory_peak_mb"]:.0f} MB)'
            )
        return '\n'.join(lines)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:  # IPython shows the text
        p.text(str(self))

    def as_dict(self) -> dict:
        """A JSON-ready copy, for reports."""
        return dict(self.__dict__)


def _jsonable(value: Any) -> Any:
    """Plain JSON types from NumPy/TF values (arrays too), tuples and objects with ``as_dict``."""
    if hasattr(value, 'as_dict'):
        return _jsonable(value.as_dict())
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if callable(getattr(value, 'numpy', None)):  # a TensorFlow tensor
        value = value.numpy()
    if callable(getattr(value, 'tolist', None)):  # NumPy scalars and arrays
        value = value.tolist()
        if isinstance(value, list):
            return _jsonable(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def atomic_write(path: str | os.PathLike, data: str | bytes) -> Path:
    """Write ``data`` to ``path`` so that a reader never sees half a file; return the path.

    The text (UTF-8) or bytes go to a new file in the same folder, which is flushed to disk and
    then renamed over ``path``. An existing file keeps its permission bits; a new one gets the
    usual ones (0o666 less the umask, applied by the operating system). On any error the
    temporary file is removed and ``path`` is left as it was.
    """
    path = Path(path)
    raw = data.encode('utf-8') if isinstance(data, str) else bytes(data)
    tmp = path.with_name(f'.{path.name}.{uuid.uuid4().hex[:12]}.tmp')
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, 'wb') as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o7777)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def save_results(results: dict[str, Any], path: str | os.PathLike | None) -> dict[str, Any]:
    """Write ``results`` as JSON to ``path`` (``None``: write nothing); return the JSON-ready dict.

    NumPy and TensorFlow values become plain numbers and lists, ``nan``/``inf`` become ``null``,
    objects with ``as_dict`` (``BenchmarkResult``) become dicts. The file is written atomically.
    """
    if not isinstance(results, dict):
        raise TypeError(f'tham số `results` phải là một dict, nhận được {type(results).__name__}')
    data = _jsonable(results)
    if path is None:
        return data
    if not isinstance(path, (str, os.PathLike)) or not str(path):
        raise TypeError(f'tham số `results_path` phải là đường dẫn hoặc None, nhận được {path!r}')
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(data, ensure_ascii=False, indent=2, sort_keys=True) + '\n'
    atomic_write(path, text)
    return data
