"""d2lhelpers: the few helpers the GPU notebooks of this collection share.

Public API (each name's docstring says which notebook teaches it):

devices     -- Device, cpu, gpu, num_gpus, try_gpu, try_all_gpus, ensure_devices, env_report
timing      -- sync_devices, Timer, benchmark
results     -- BenchmarkResult, EnvReport, format_seconds, save_results, atomic_write
checks      -- check_int, check_positive_int, check_int_list, check_choice, check_index,
               check_seconds, check_devices, device_name
datasheets  -- GPUSpec, DATASHEETS, find_spec
multiworker -- run_workers, WorkerResult, WorkerError, WorkerTimeout, NetworkIsolationError,
               tf_config

``devices`` and ``timing`` use TensorFlow; the other modules do not. ``python -m d2lhelpers.batch``
runs the notebooks with papermill (see its ``--help``).

Importing the package has no side effects: it does not seed anything, set devices or even import
TensorFlow until a TensorFlow helper is first used (``from d2lhelpers import check_int_list``
stays light).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = '0.2.0'

__all__ = [
    # devices
    'Device',
    'cpu',
    'gpu',
    'num_gpus',
    'try_gpu',
    'try_all_gpus',
    'ensure_devices',
    'env_report',
    # timing
    'sync_devices',
    'Timer',
    'benchmark',
    # results
    'BenchmarkResult',
    'EnvReport',
    'format_seconds',
    'save_results',
    'atomic_write',
    # checks
    'check_int',
    'check_positive_int',
    'check_int_list',
    'check_choice',
    'check_index',
    'check_seconds',
    'check_devices',
    'device_name',
    # datasheets
    'GPUSpec',
    'DATASHEETS',
    'find_spec',
    # multiworker
    'run_workers',
    'WorkerResult',
    'WorkerError',
    'WorkerTimeout',
    'NetworkIsolationError',
    'tf_config',
]

_MODULE_OF = {
    **dict.fromkeys(
        ['Device', 'cpu', 'gpu', 'num_gpus', 'try_gpu', 'try_all_gpus', 'ensure_devices'],
        'devices',
    ),
    'env_report': 'devices',
    **dict.fromkeys(['sync_devices', 'Timer', 'benchmark'], 'timing'),
    **dict.fromkeys(
        ['BenchmarkResult', 'EnvReport', 'format_seconds', 'save_results', 'atomic_write'],
        'results',
    ),
    **dict.fromkeys(
        [
            'check_int',
            'check_positive_int',
            'check_int_list',
            'check_choice',
            'check_index',
            'check_seconds',
            'check_devices',
            'device_name',
        ],
        'checks',
    ),
    **dict.fromkeys(['GPUSpec', 'DATASHEETS', 'find_spec'], 'datasheets'),
    **dict.fromkeys(
        [
            'run_workers',
            'WorkerResult',
            'WorkerError',
            'WorkerTimeout',
            'NetworkIsolationError',
            'tf_config',
        ],
        'multiworker',
    ),
}

if TYPE_CHECKING:  # what editors and type checkers see; at run time names load on first use
    from .checks import (
        check_choice,
        check_devices,
        check_index,
        check_int,
        check_int_list,
        check_positive_int,
        check_seconds,
        device_name,
    )
    from .datasheets import DATASHEETS, GPUSpec, find_spec
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
    from .multiworker import (
        NetworkIsolationError,
        WorkerError,
        WorkerResult,
        WorkerTimeout,
        run_workers,
        tf_config,
    )
    from .results import BenchmarkResult, EnvReport, atomic_write, format_seconds, save_results
    from .timing import Timer, benchmark, sync_devices


def __getattr__(name: str) -> Any:
    if name in _MODULE_OF:
        value = getattr(importlib.import_module(f'{__name__}.{_MODULE_OF[name]}'), name)
        globals()[name] = value
        return value
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
