"""Devices: name them, count them, fall back safely, and report what the machine has.

d2l's names and call shapes (``cpu``, ``gpu``, ``num_gpus``, ``try_gpu``, ``try_all_gpus``,
``device._device_name``) with d2l's defects fixed: a device prints as its name, ``try_all_gpus()``
is never empty, logical GPUs count, and counting does not start TensorFlow's runtime.
"""

from __future__ import annotations

import math
import subprocess
from contextlib import suppress
from dataclasses import asdict, dataclass, field
from typing import Any

from .checks import check_int, check_number, device_name


class Device(str):
    """A device name such as ``/GPU:0`` (a ``str``) that is also a device context: ``with d:``
    is ``with tf.device(d):``; ``Device(x.device) == d`` asks where tensor ``x`` is."""

    def __new__(cls, name: str) -> Device:
        return super().__new__(cls, device_name(name))

    __repr__ = str.__str__

    @property
    def kind(self) -> str:
        """``'GPU'``, ``'CPU'``, ...: the device type."""
        return self[1 : self.index(':')]

    @property
    def _device_name(self) -> str:
        """The name, where d2l's TensorFlow code reads it from a ``tf.device(...)`` context."""
        return str(self)

    def __enter__(self) -> Device:
        import tensorflow as tf

        ctx = tf.device(str(self))
        ctx.__enter__()
        self.__dict__.setdefault('_contexts', []).append(ctx)
        return self

    def __exit__(self, *exc: object) -> None:
        self.__dict__['_contexts'].pop().__exit__(*exc)


def cpu() -> Device:
    """The CPU: ``/CPU:0``."""
    return Device('/CPU:0')


def gpu(i: int = 0) -> Device:
    """GPU number ``i`` (it need not exist: use ``try_gpu`` for a safe fallback)."""
    return Device(f'/GPU:{check_int("i", i, 0)}')


def num_gpus() -> int:
    """How many GPUs TensorFlow can use, logical GPUs included, without starting its runtime."""
    import tensorflow as tf

    return sum(
        len(tf.config.get_logical_device_configuration(g) or [g])
        for g in tf.config.get_visible_devices('GPU')
    )


def try_gpu(i: int = 0) -> Device:
    """Return ``gpu(i)`` if it exists, otherwise ``cpu()``."""
    if check_int('i', i, 0) < num_gpus():
        return gpu(i)
    return cpu()


def try_all_gpus() -> list[Device]:
    """Return every GPU, or ``[cpu()]`` if there is none (never an empty list)."""
    return [gpu(i) for i in range(num_gpus())] or [cpu()]


def ensure_devices(n: int = 1, *, need_bytes: float | None = None) -> list[Device]:
    """Give the notebook ``n`` devices of one kind, splitting a physical device when needed.

    With ``n`` or more GPUs: the first ``n``. With fewer: GPU 0 is split into logical GPUs until
    there are ``n``, each with a memory limit of twice ``need_bytes`` (what one device must hold)
    plus 512 MB for TensorFlow's own buffers, rounded up to 256 MB, and at least 1024 MB (2048 MB
    when ``need_bytes`` is not given). Without a GPU: the CPU is split into ``n`` logical CPUs
    (never when there is a GPU). A line says so whenever it splits. Every GPU it does not split is
    asked for memory growth (GPU memory taken as needed, not all of it at start); TensorFlow 2.21
    drops that request on every GPU once any device, a CPU included, has a logical-device
    configuration (its ``context.py``; tests/package/test_memory_growth.py; not yet seen on a GPU).
    ``TF_FORCE_GPU_ALLOW_GROWTH=true``, set before the runtime starts, keeps growth regardless.

    Call it before TensorFlow's runtime starts (first op, device scope, ``env_report()``); again
    with the same arguments, it returns the same devices; with another memory limit, it raises.
    """
    import tensorflow as tf

    n = check_int('n', n)
    memory_limit_mb = 2048
    if need_bytes is not None:
        need = check_number('need_bytes', need_bytes, minimum=0)
        memory_limit_mb = max(1024, 256 * math.ceil((2 * need + 2**29) / 2**28))
    gpus = tf.config.get_visible_devices('GPU')
    kind, physical = ('GPU', gpus) if gpus else ('CPU', tf.config.get_visible_devices('CPU'))
    configs = [tf.config.get_logical_device_configuration(p) for p in physical]
    have = sum(len(c or [p]) for c, p in zip(configs, physical, strict=False))
    split = kind == 'GPU' and configs[0]
    if split and {c.memory_limit for c in configs[0]} != {memory_limit_mb}:
        raise RuntimeError(
            f'GPU:0 đã được chia thành thiết bị logic {configs[0][0].memory_limit} MB; không đổi '
            f'được thành {memory_limit_mb} MB khi TensorFlow đang chạy. Hãy khởi động lại kernel '
            '(restart) rồi chạy lại từ đầu.'
        )
    if have >= n:
        _grow(tf, [p for c, p in zip(configs, physical, strict=False) if kind == 'GPU' and not c])
        return [Device(f'/{kind}:{i}') for i in range(n)]
    extra = n - len(physical) + 1
    config = tf.config.LogicalDeviceConfiguration(
        memory_limit=memory_limit_mb if kind == 'GPU' else None
    )
    try:
        tf.config.set_logical_device_configuration(physical[0], [config] * extra)
    except RuntimeError as err:
        raise RuntimeError(
            f'không chia được {kind}:0 thành {extra} thiết bị logic: TensorFlow đã khởi động các '
            'thiết bị của nó (một phép toán, một khối `with tf.device(...)` hay `with try_gpu():`, '
            'env_report() đã chạy trước). Hãy khởi động lại kernel (restart) và gọi '
            'ensure_devices() ngay sau khi import.'
        ) from err
    _grow(tf, physical[1:] if kind == 'GPU' else [])
    print(
        f'Chỉ có {len(physical)} {kind} vật lý: đã chia {kind}:0 thành {extra} thiết bị logic '
        '(logical device) dùng chung phần cứng của nó.'
    )
    return [Device(f'/{kind}:{i}') for i in range(n)]


def _grow(tf: Any, gpus: list) -> None:
    for g in gpus:
        with suppress(RuntimeError, ValueError):  # runtime already started: leave it as it is
            tf.config.experimental.set_memory_growth(g, True)


@dataclass
class GPUInfo:
    """One logical GPU: its physical GPU, that GPU's data and memory, and its own limit
    (MB = 2^20 B)."""

    device: str
    name: str | None = None
    compute_capability: str | None = None  # '8.0'
    physical: int | None = None
    memory_total_mb: float | None = None  # of the physical GPU (nvidia-smi), None if unknown
    memory_limit_mb: float | None = None  # of this logical device, None if not split

    def __str__(self) -> str:
        total = f'{self.memory_total_mb:.0f} MB' if self.memory_total_mb else 'bộ nhớ ?'
        limit = self.memory_limit_mb and f', thiết bị logic giới hạn {self.memory_limit_mb:.0f} MB'
        return (
            f'{self.device}: {self.name or "?"}, compute capability '
            f'{self.compute_capability or "?"}, GPU vật lý {self.physical} ({total}){limit or ""}'
        )


@dataclass(repr=False)
class EnvReport:
    """What TensorFlow sees on this machine; its text replaces ``!nvidia-smi``."""

    tensorflow: str
    keras: str
    numpy: str
    built_with_cuda: bool
    cuda: str | None
    cudnn: str | None
    physical: list[str]
    logical: list[str]
    tf32: bool
    gpus: list[GPUInfo] = field(default_factory=list)

    def __str__(self) -> str:
        cuda = f'có (CUDA {self.cuda}, cuDNN {self.cudnn})' if self.built_with_cuda else 'không'
        tf32 = 'bật' if self.tf32 else 'tắt'
        lines = [
            f'TensorFlow {self.tensorflow}, Keras {self.keras}, NumPy {self.numpy}',
            f'bản build có CUDA: {cuda}',
            'thiết bị vật lý: ' + ', '.join(self.physical),
            'thiết bị logic:  ' + ', '.join(self.logical),
            f'TF32 cho phép nhân float32 (chỉ GPU từ Ampere trở lên): {tf32}',
        ]
        lines += [str(g) for g in self.gpus] or ['GPU: không tìm thấy GPU nào']
        return '\n'.join(lines)

    __repr__ = __str__

    def as_dict(self) -> dict:
        return asdict(self)


def smi_rows() -> list[dict[str, str]]:
    """nvidia-smi's GPUs (name, memory.total in MiB, driver_version), in its own (PCI) order;
    [] without it. The one nvidia-smi query of the project (gpucheck.record too)."""
    query = 'name,memory.total,driver_version'
    try:
        out = subprocess.run(
            ['nvidia-smi', f'--query-gpu={query}', '--format=csv,noheader,nounits'],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    rows = [
        dict(zip(query.split(','), map(str.strip, ln.split(',')), strict=False))
        for ln in out.splitlines()
    ]
    return [r for r in rows if len(r) == 3]


def _memory_total_mb(name: str | None, rows: list[dict[str, str]]) -> float | None:
    """The memory of a GPU named ``name`` as nvidia-smi gives it (MiB), when every GPU of that
    name has the same; else None. Pairing by name, not by number: CUDA numbers GPUs fastest first
    and after ``CUDA_VISIBLE_DEVICES``, nvidia-smi in PCI order."""
    totals = {r['memory.total'] for r in rows if r['name'] == name}
    numbers = [float(t) for t in totals if t.replace('.', '').isdigit()]  # not '[N/A]'
    return numbers[0] if len(totals) == 1 and numbers else None


def env_report() -> EnvReport:
    """Describe TensorFlow, its build and the devices it sees; works with or without a GPU.

    It starts TensorFlow's runtime (it lists the logical devices): call ``ensure_devices`` first.
    """
    import keras
    import numpy as np
    import tensorflow as tf

    info = tf.sysconfig.get_build_info()
    rows = smi_rows()
    physical = tf.config.get_visible_devices('GPU')
    # Logical GPUs come in physical order, each physical GPU giving as many as it was split into.
    owner = [
        (p, config.memory_limit if config is not dev else None)
        for p, dev in enumerate(physical)
        for config in (tf.config.get_logical_device_configuration(dev) or [dev])
    ]
    gpus = []
    for i, dev in enumerate(tf.config.list_logical_devices('GPU')):
        g = GPUInfo(Device(dev.name))
        if i < len(owner):
            g.physical, g.memory_limit_mb = owner[i]
            details = tf.config.experimental.get_device_details(physical[g.physical])
            cc = details.get('compute_capability')
            g.name = details.get('device_name')
            g.compute_capability = '.'.join(map(str, cc)) if cc else None
            g.memory_total_mb = _memory_total_mb(g.name, rows)
        gpus.append(g)
    return EnvReport(
        tensorflow=tf.__version__,
        keras=keras.__version__,
        numpy=np.__version__,
        built_with_cuda=tf.test.is_built_with_cuda(),
        cuda=info.get('cuda_version'),
        cudnn=info.get('cudnn_version'),
        physical=[str(Device(d.name)) for d in tf.config.list_physical_devices()],
        logical=[str(Device(d.name)) for d in tf.config.list_logical_devices()],
        tf32=tf.config.experimental.tensor_float_32_execution_enabled(),
        gpus=gpus,
    )
