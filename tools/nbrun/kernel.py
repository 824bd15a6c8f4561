"""The Jupyter kernel the notebooks are executed with, the same for papermill and nbval.

ipykernel 7 forwards output written by C/C++ code (file-descriptor level) into the notebook, but
not when it runs under pytest, so an output recorded by papermill could hold lines that nbval never
sees. Both therefore run the kernel with ``capture_fd_output`` off: ``make`` installs a ``python3``
kernelspec with these arguments into ``.venv`` (``python -m nbrun.kernel PREFIX``) and the
batch runner passes them to papermill itself.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

__all__ = ['KERNEL_ARGS', 'QUIET_ENV', 'install_kernelspec', 'available_cores']

KERNEL_ARGS = ['--IPKernelApp.capture_fd_output=False']
# The one definition of the environment in which notebook code runs (kernels of nbval and of the
# batch runner, test processes, multi-worker processes). Set before TensorFlow is imported: no
# oneDNN/absl/cpu-feature lines on stderr; TensorFlow's own (Eigen) CPU kernels instead of oneDNN's,
# which TF turns on by default on x86 (TF still picks kernels by the CPU's instruction set, so the
# last bits of a result can differ between machines); and one order for sets and str-keyed dicts.
QUIET_ENV = {'TF_CPP_MIN_LOG_LEVEL': '2', 'TF_ENABLE_ONEDNN_OPTS': '0', 'PYTHONHASHSEED': '0'}


def available_cores() -> int:
    """The cores this process may use (its CPU affinity on Linux; all cores elsewhere)."""
    if hasattr(os, 'sched_getaffinity'):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def install_kernelspec(prefix: str | Path) -> Path:
    """Write ``PREFIX/share/jupyter/kernels/python3/kernel.json`` for this interpreter.

    Returns the path of the file written.
    """
    path = Path(prefix) / 'share' / 'jupyter' / 'kernels' / 'python3' / 'kernel.json'
    path.parent.mkdir(parents=True, exist_ok=True)
    spec = {
        'argv': [
            sys.executable,
            '-m',
            'ipykernel_launcher',
            *KERNEL_ARGS,
            '-f',
            '{connection_file}',
        ],
        'display_name': 'Python 3 (ipykernel)',
        'language': 'python',
        'env': QUIET_ENV,
        'metadata': {'debugger': True},
    }
    path.write_text(json.dumps(spec, indent=1) + '\n', encoding='utf-8')
    return path


if __name__ == '__main__':
    if len(sys.argv) != 2:
        sys.exit('usage: python -m nbrun.kernel PREFIX')
    print(install_kernelspec(sys.argv[1]))
