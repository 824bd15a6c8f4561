"""Devices: name them, count them, fall back safely, and report what the machine has.

Taught in ``notebooks/use-gpu.ipynb`` (sections "Thiết bị tính toán" and "Tensor và GPU").

The d2l names and call shapes are kept (``cpu()``, ``gpu(i)``, ``num_gpus()``, ``try_gpu(i)``,
``try_all_gpus()``) so that d2l-style code such as ``with try_gpu(): ...`` or ``tf.device(try_gpu())``
keeps working, with three of d2l's defects fixed:

* a device reads as its name (``/GPU:0``), not as ``_EagerDeviceContext at 0x7f...``;
* ``try_all_gpus()`` returns ``[cpu()]`` when there is no GPU, never ``[]``;
* logical GPUs count (one physical GPU split in two is two GPUs for TensorFlow).
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field

import tensorflow as tf

from ._checks import check_int

__all__ = [
    'Device',
    'cpu',
    'gpu',
    'num_gpus',
    'try_gpu',
    'try_all_gpus',
    'ensure_devices',
    'env_report',
    'EnvReport',
    'check_index',
]


def check_index(i: object, name: str = 'i') -> int:
    """Return ``i`` if it is a non-negative int, else raise a clear TypeError/ValueError.

    ``True`` and ``1.5`` are refused (TypeError), as is ``-1`` (ValueError): ``gpu(-1)`` would
    otherwise name a device that cannot exist.
    """
    return check_int(name, i, 0)


class Device(str):
    """A device name such as ``/GPU:0`` that is also a context manager.

    It *is* a ``str``, so ``tf.device(d)``, ``x.device.endswith(d)`` and f-strings work, and it
    shows as its name. ``with d:`` places the ops created in the block on that device, exactly like
    ``with tf.device(d):``.
    """

    def __new__(cls, name: str) -> Device:
        if not isinstance(name, (str, tf.DeviceSpec)):
            raise TypeError(
                f'a device name must be a str such as "/GPU:0", got {name!r} '
                f'({type(name).__name__})'
            )
        spec = tf.DeviceSpec.from_string(name) if isinstance(name, str) else name
        if not spec.device_type:
            raise ValueError(f'not a device name: {name!r} (expected e.g. "/CPU:0" or "/GPU:1")')
        return super().__new__(cls, f'/{spec.device_type.upper()}:{spec.device_index or 0}')

    def __repr__(self) -> str:
        return str(self)

    def __enter__(self) -> Device:
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
    return Device(f'/GPU:{check_index(i)}')


def num_gpus() -> int:
    """How many GPUs TensorFlow can use, logical GPUs included (d2l counted physical ones only)."""
    return len(tf.config.list_logical_devices('GPU'))


def try_gpu(i: int = 0) -> Device:
    """Return ``gpu(i)`` if it exists, otherwise ``cpu()``."""
    if num_gpus() >= check_index(i) + 1:
        return gpu(i)
    return cpu()


def try_all_gpus() -> list[Device]:
    """Return every GPU, or ``[cpu()]`` if there is none (never an empty list)."""
    return [gpu(i) for i in range(num_gpus())] or [cpu()]


def ensure_devices(n: int = 2, memory_limit_mb: int = 2048) -> list[Device]:
    """Give the notebook ``n`` devices of one kind, splitting a physical device when needed.

    With ``n`` or more GPUs: the first ``n`` GPUs. With fewer GPUs: GPU 0 is split into logical GPUs
    of ``memory_limit_mb`` each until there are ``n``. Without a GPU: the CPU is split into ``n``
    logical CPUs. Logical devices share the hardware of the device they were split from; a line
    printed by this function says so whenever it splits.

    It must run before TensorFlow has run any op (TensorFlow fixes its devices then); calling it
    again later with the same ``n`` is fine and returns the same devices.
    """
    n = check_int('n', n, 1)
    memory_limit_mb = check_int('memory_limit_mb', memory_limit_mb, 1)
    gpus = tf.config.list_physical_devices('GPU')
    kind, physical = ('GPU', gpus) if gpus else ('CPU', tf.config.list_physical_devices('CPU'))
    if len(physical) >= n:
        return [Device(f'/{kind}:{i}') for i in range(n)]
    # Already split (a re-run cell)? Then the logical devices are there and nothing changes.
    if tf.config.get_logical_device_configuration(physical[0]):
        have = tf.config.list_logical_devices(kind)
        if len(have) >= n:
            return [Device(f'/{kind}:{i}') for i in range(n)]
    extra = n - len(physical) + 1
    config = (
        tf.config.LogicalDeviceConfiguration(memory_limit=memory_limit_mb)
        if kind == 'GPU'
        else tf.config.LogicalDeviceConfiguration()
    )
    try:
        tf.config.set_logical_device_configuration(physical[0], [config] * extra)
    except RuntimeError as err:
        raise RuntimeError(
            f'cannot split {physical[0].name} into {extra} logical devices: TensorFlow has already '
            'started its devices. Call ensure_devices() before any other TensorFlow op '
            '(restart the kernel and run the setup cell first).'
        ) from err
    print(
        f'Chỉ có {len(physical)} {kind} vật lý: đã chia {physical[0].name.replace("/physical_device:", "")} '
        f'thành {extra} thiết bị logic (logical device) dùng chung phần cứng của nó.'
    )
    return [Device(f'/{kind}:{i}') for i in range(n)]


@dataclass
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
    gpus: list[dict] = field(default_factory=list)

    def __str__(self) -> str:
        lines = [
            f'TensorFlow {self.tensorflow}, Keras {self.keras}, NumPy {self.numpy}',
            'bản build có CUDA: '
            + (
                f'có (CUDA {self.cuda}, cuDNN {self.cudnn})'
                if self.built_with_cuda
                else 'không (chỉ chạy trên CPU)'
            ),
            'thiết bị vật lý: ' + ', '.join(self.physical),
            'thiết bị logic:  ' + ', '.join(self.logical),
        ]
        if not self.gpus:
            lines.append('GPU: không tìm thấy GPU nào')
        for g in self.gpus:
            lines.append(
                f'{g["device"]}: {g.get("name", "?")}, compute capability '
                f'{g.get("compute_capability", "?")}, bộ nhớ GPU vật lý {g.get("memory_total", "?")}, '
                f'TF đang dùng {g["memory_current_mb"]:.0f} MB (đỉnh {g["memory_peak_mb"]:.0f} MB)'
            )
        return '\n'.join(lines)

    def _repr_pretty_(self, p, cycle) -> None:  # IPython shows the text, not the dataclass repr
        p.text(str(self))

    def as_dict(self) -> dict:
        """A JSON-ready copy, for reports."""
        return dict(self.__dict__)


def _nvidia_smi_memory() -> list[str]:
    """Total memory per GPU from nvidia-smi when it exists (TF does not expose the total)."""
    if not shutil.which('nvidia-smi'):
        return []
    try:
        out = subprocess.run(
            ['nvidia-smi', '--query-gpu=memory.total', '--format=csv,noheader'],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in out.splitlines() if line.strip()]


def env_report() -> EnvReport:
    """Describe TensorFlow, its build and the devices it sees; works with or without a GPU."""
    import keras
    import numpy as np

    info = tf.sysconfig.get_build_info()
    totals = _nvidia_smi_memory()
    physical = tf.config.list_physical_devices('GPU')
    # Logical GPUs come in physical order, each physical GPU giving as many as it was split into
    # (Colab's T4 split in two by ensure_devices: /GPU:0 and /GPU:1 are both physical GPU 0).
    owner = [
        p
        for p, dev in enumerate(physical)
        for _ in range(len(tf.config.get_logical_device_configuration(dev) or [None]))
    ]
    gpus = []
    for i, dev in enumerate(tf.config.list_logical_devices('GPU')):
        mem = tf.config.experimental.get_memory_info(dev.name)
        entry = {
            'device': Device(dev.name),
            'memory_current_mb': mem['current'] / 2**20,
            'memory_peak_mb': mem['peak'] / 2**20,
        }
        p = owner[i] if i < len(owner) else None
        if p is not None:
            details = tf.config.experimental.get_device_details(physical[p])
            entry['name'] = details.get('device_name', '?')
            cc = details.get('compute_capability')
            entry['compute_capability'] = '.'.join(map(str, cc)) if cc else '?'
            if p < len(totals):
                entry['memory_total'] = totals[p]
        gpus.append(entry)
    return EnvReport(
        tensorflow=tf.__version__,
        keras=keras.__version__,
        numpy=np.__version__,
        built_with_cuda=tf.test.is_built_with_cuda(),
        cuda=info.get('cuda_version'),
        cudnn=info.get('cudnn_version'),
        physical=[
            d.name.replace('/physical_device:', '/') for d in tf.config.list_physical_devices()
        ],
        logical=[str(Device(d.name)) for d in tf.config.list_logical_devices()],
        gpus=gpus,
    )
