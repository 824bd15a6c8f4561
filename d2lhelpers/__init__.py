"""d2lhelpers: the few helpers the GPU notebooks of this collection share.

- devices: ``Device``, ``cpu``, ``gpu``, ``num_gpus``, ``try_gpu``, ``try_all_gpus`` (as in d2l,
  with its defects fixed), ``ensure_devices``, ``env_report``;
- timing: ``benchmark``, ``interleave`` (synchronised, repeated, median and IQR), ``compare`` (the
  one verdict rule), ``Breakdown``, ``format_seconds``, ``NEAR_FLOOR``, ``TIE_BAND``;
- checks: ``check_int``, ``check_int_list``, ``check_auto`` (errors that name the parameter);
- ``save_results``; ``DATASHEETS``/``find_spec`` (published GPU figures); ``reference``,
  ``compare_runs``, ``host_ratio`` and ``ReferenceKeyError`` (figures of stored reference runs);
- ``run_workers`` (``MultiWorkerMirroredStrategy`` workers on one machine) and its errors.

The types these return (``BenchmarkResult``, ``Comparison``, ``EnvReport``, ``GPUSpec``,
``Reference``, ``WorkerResult``...) live in their modules. Importing the package does not import
TensorFlow (the helpers that need it import it when called) and has no side effects. Its only
dependency is NumPy; TensorFlow and Keras come from the environment.
"""

from __future__ import annotations

__version__ = '0.3.0'

from .checks import check_auto, check_int, check_int_list
from .datasheets import DATASHEETS, find_spec
from .devices import (
    Device,
    cpu,
    ensure_devices,
    env_report,
    gpu,
    num_gpus,
    try_all_gpus,
    try_gpu,
)
from .multiworker import NetworkIsolationError, WorkerError, WorkerTimeout, run_workers
from .reference import ReferenceKeyError, compare_runs, host_ratio, reference
from .results import save_results
from .timing import (
    NEAR_FLOOR,
    TIE_BAND,
    Breakdown,
    benchmark,
    compare,
    format_seconds,
    interleave,
)

__all__ = [
    'DATASHEETS',
    'NEAR_FLOOR',
    'TIE_BAND',
    'Breakdown',
    'Device',
    'NetworkIsolationError',
    'ReferenceKeyError',
    'WorkerError',
    'WorkerTimeout',
    'benchmark',
    'check_auto',
    'check_int',
    'check_int_list',
    'compare',
    'compare_runs',
    'cpu',
    'ensure_devices',
    'env_report',
    'find_spec',
    'format_seconds',
    'gpu',
    'host_ratio',
    'interleave',
    'num_gpus',
    'reference',
    'run_workers',
    'save_results',
    'try_all_gpus',
    'try_gpu',
]
