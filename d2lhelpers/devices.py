"""Devices: name them, count them, fall back safely, and report what the machine has.

Taught in ``notebooks/use-gpu.ipynb`` (sections "Thiết bị tính toán" and "Tensor và GPU").

The d2l names and call shapes are kept (``cpu()``, ``gpu(i)``, ``num_gpus()``, ``try_gpu(i)``,
``try_all_gpus()``), so d2l-style code keeps working: ``with try_gpu(): ...``,
``tf.device(try_gpu())``, and d2l's own training functions, which read ``device._device_name``.
Four of d2l's defects are fixed:

* a device reads as its name (``/GPU:0``), not as ``_EagerDeviceContext at 0x7f...``;
* ``try_all_gpus()`` returns ``[cpu()]`` when there is no GPU, never ``[]``;
* logical GPUs count (one physical GPU split in two is two GPUs for TensorFlow);
* counting GPUs does not start TensorFlow's runtime, so ``ensure_devices`` can still split a
  device after ``try_gpu()`` or ``num_gpus()`` (``env_report()`` does start it).
"""

from __future__ import annotations

import shutil
import subprocess

import tensorflow as tf

from .checks import check_index, check_int, device_name
from .results import EnvReport

__all__ = [
    'Device',
    'cpu',
    'gpu',
    'num_gpus',
    'try_gpu',
    'try_all_gpus',
    'ensure_devices',
    'env_report',
]


class Device(str):
    """A device name such as ``/GPU:0`` that is also a device context.

    It *is* a ``str``: ``tf.device(d)``, ``d == '/GPU:0'`` and f-strings work, and it shows as its
    name. ``with d:`` places the ops created in the block on that device, exactly like
    ``with tf.device(d):``. To ask where a tensor is, compare ``Device(x.device) == d``
    (``x.device`` is TensorFlow's long name, ``/job:localhost/replica:0/task:0/device:GPU:0``).
    """

    def __new__(cls, name: str | tf.DeviceSpec) -> Device:
        if isinstance(name, tf.DeviceSpec):
            name = f'{name.device_type or ""}:{name.device_index or 0}'
        return super().__new__(cls, device_name(name))

    def __repr__(self) -> str:
        return str(self)

    @property
    def _device_name(self) -> str:
        """The name, where d2l's TensorFlow code reads it from a ``tf.device(...)`` context."""
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
    """How many GPUs TensorFlow can use, logical GPUs included, without starting its runtime."""
    return sum(
        len(tf.config.get_logical_device_configuration(g) or [g])
        for g in tf.config.get_visible_devices('GPU')
    )


def try_gpu(i: int = 0) -> Device:
    """Return ``gpu(i)`` if it exists, otherwise ``cpu()``."""
    if check_index(i) < num_gpus():
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

    Call it before TensorFlow starts its runtime: before the first op, the first device scope
    (``with tf.device(...)``, ``with try_gpu():``), ``env_report()`` or
    ``tf.config.list_logical_devices()`` (``num_gpus``, ``try_gpu`` and ``try_all_gpus`` themselves
    do not start it). Calling it again later with the same ``n`` is fine and returns the same
    devices.
    """
    n = check_int('n', n, 1)
    memory_limit_mb = check_int('memory_limit_mb', memory_limit_mb, 1)
    gpus = tf.config.get_visible_devices('GPU')
    kind, physical = ('GPU', gpus) if gpus else ('CPU', tf.config.get_visible_devices('CPU'))
    have = sum(len(tf.config.get_logical_device_configuration(p) or [p]) for p in physical)
    if have >= n:
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
            'thiết bị của nó (một phép toán TensorFlow, một khối `with tf.device(...)` hay '
            '`with try_gpu():`, env_report() hoặc tf.config.list_logical_devices() đã chạy '
            'trước). Hãy khởi động lại kernel (restart) và gọi ensure_devices() ngay sau khi '
            'import, trước mọi thứ đó.'
        ) from err
    print(
        f'Chỉ có {len(physical)} {kind} vật lý: đã chia {kind}:0 thành {extra} thiết bị logic '
        '(logical device) dùng chung phần cứng của nó.'
    )
    return [Device(f'/{kind}:{i}') for i in range(n)]


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
    """Describe TensorFlow, its build and the devices it sees; works with or without a GPU.

    It starts TensorFlow's runtime (it asks each GPU how much memory TensorFlow holds there), so
    call ``ensure_devices`` first.
    """
    import keras
    import numpy as np

    info = tf.sysconfig.get_build_info()
    totals = _nvidia_smi_memory()
    physical = tf.config.get_visible_devices('GPU')
    # Logical GPUs come in physical order, each physical GPU giving as many as it was split into
    # (Colab's T4 split in two by ensure_devices: /GPU:0 and /GPU:1 are both physical GPU 0).
    owner = [
        (p, config.memory_limit if config is not dev else None)
        for p, dev in enumerate(physical)
        for config in (tf.config.get_logical_device_configuration(dev) or [dev])
    ]
    gpus = []
    for i, dev in enumerate(tf.config.list_logical_devices('GPU')):
        mem = tf.config.experimental.get_memory_info(dev.name)
        entry = {
            'device': Device(dev.name),
            'memory_current_mb': mem['current'] / 2**20,
            'memory_peak_mb': mem['peak'] / 2**20,
        }
        if i < len(owner):
            p, limit = owner[i]
            details = tf.config.experimental.get_device_details(physical[p])
            cc = details.get('compute_capability')
            entry.update(
                name=details.get('device_name', '?'),
                compute_capability='.'.join(map(str, cc)) if cc else '?',
                physical=p,
                memory_limit_mb=limit,
            )
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
        physical=[str(Device(d.name)) for d in tf.config.list_physical_devices()],
        logical=[str(Device(d.name)) for d in tf.config.list_logical_devices()],
        tf32=tf.config.experimental.tensor_float_32_execution_enabled(),
        gpus=gpus,
    )
