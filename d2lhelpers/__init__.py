"""d2lhelpers: the few helpers the GPU notebooks of this collection share.

- devices: ``Device``, ``cpu``, ``gpu``, ``num_gpus``, ``try_gpu``, ``try_all_gpus`` (as in d2l,
  with its defects fixed), ``ensure_devices``, ``env_report``;
- timing: ``Timer`` (as ``d2l.Timer``, synchronised), ``benchmark``, ``interleave``, ``compare``
  (the one verdict rule), ``format_seconds``, ``NEAR_FLOOR``, ``TIE_BAND``;
- checks: argument checks with Vietnamese errors; ``save_results``; ``DATASHEETS``/``find_spec``
  (published GPU figures); ``reference`` (GPU answers from a stored reference run);
- ``run_workers`` (``MultiWorkerMirroredStrategy`` workers on one machine).

Importing it does not import TensorFlow (the helpers that need it import it when called) and has
no side effects. Its only dependency is NumPy; TensorFlow and Keras come from the environment.
"""

from __future__ import annotations

__version__ = '0.3.0'

from .checks import (
    check_auto,
    check_int,
    check_int_list,
    check_number,
    check_seconds,
    device_name,
)
from .datasheets import DATASHEETS, GPUSpec, find_spec
from .devices import (
    Device,
    EnvReport,
    GPUInfo,
    cpu,
    ensure_devices,
    env_report,
    gpu,
    num_gpus,
    try_all_gpus,
    try_gpu,
)
from .multiworker import (
    NetworkIsolationError,
    WorkerError,
    WorkerResult,
    WorkerTimeout,
    run_workers,
    tf_config,
)
from .reference import Reference, ReferenceKeyError, reference
from .results import save_results
from .timing import (
    NEAR_FLOOR,
    TIE_BAND,
    BenchmarkResult,
    Breakdown,
    Comparison,
    Timer,
    benchmark,
    compare,
    format_seconds,
    interleave,
    sync_devices,
)

__all__ = [
    'DATASHEETS',
    'NEAR_FLOOR',
    'TIE_BAND',
    'BenchmarkResult',
    'Breakdown',
    'Comparison',
    'Device',
    'EnvReport',
    'GPUInfo',
    'GPUSpec',
    'NetworkIsolationError',
    'Reference',
    'ReferenceKeyError',
    'Timer',
    'WorkerError',
    'WorkerResult',
    'WorkerTimeout',
    'benchmark',
    'check_auto',
    'check_int',
    'check_int_list',
    'check_number',
    'check_seconds',
    'compare',
    'cpu',
    'device_name',
    'ensure_devices',
    'env_report',
    'find_spec',
    'format_seconds',
    'gpu',
    'interleave',
    'num_gpus',
    'reference',
    'run_workers',
    'save_results',
    'sync_devices',
    'tf_config',
    'try_all_gpus',
    'try_gpu',
]
