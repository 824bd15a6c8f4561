"""d2lhelpers: the few helpers the GPU notebooks of this collection share.

Public API (each name's docstring says which notebook teaches it):

devices  -- Device, cpu, gpu, num_gpus, try_gpu, try_all_gpus, ensure_devices, env_report, EnvReport
timing   -- sync_devices, Timer, benchmark, BenchmarkResult, format_seconds
params   -- check_positive_int, check_int_list, check_choice, save_results
multiworker -- run_workers, WorkerResult, WorkerError, WorkerTimeout

``python -m d2lhelpers.batch`` runs the notebooks with papermill (see its ``--help``).

Importing the package has no side effects: it does not seed anything, set devices or even import
TensorFlow until a TensorFlow helper is first used.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = '0.1.0'

_WHERE = {
    'devices': [
        'Device',
        'cpu',
        'gpu',
        'num_gpus',
        'try_gpu',
        'try_all_gpus',
        'ensure_devices',
        'env_report',
        'EnvReport',
    ],
    'timing': ['sync_devices', 'Timer', 'benchmark', 'BenchmarkResult', 'format_seconds'],
    'params': ['check_positive_int', 'check_int_list', 'check_choice', 'save_results'],
    'multiworker': ['run_workers', 'WorkerResult', 'WorkerError', 'WorkerTimeout'],
}
_MODULE_OF = {name: module for module, names in _WHERE.items() for name in names}
__all__ = [name for names in _WHERE.values() for name in names]


def __getattr__(name: str) -> Any:
    if name in _MODULE_OF:
        value = getattr(importlib.import_module(f'{__name__}.{_MODULE_OF[name]}'), name)
        globals()[name] = value
        return value
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
