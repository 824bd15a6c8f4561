"""The Jupyter kernel the notebooks are executed with, the same for papermill and nbval.

ipykernel 7 forwards output written by C/C++ code (file-descriptor level) into the notebook, but
not when it runs under pytest, so an output recorded by papermill could hold lines that nbval never
sees. Both therefore run the kernel with ``capture_fd_output`` off: ``make`` installs a ``python3``
kernelspec with these arguments into ``.venv`` (``python -m nbrun.kernel PREFIX``) and the
batch runner installs the same one into a private folder for its workers.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

__all__ = ['KERNEL_ARGS', 'QUIET_ENV', 'install_kernelspec']

KERNEL_ARGS = ['--IPKernelApp.capture_fd_output=False']
# The one definition of the environment in which notebook code runs (kernels of nbval and of the
# batch runner, test processes, multi-worker processes). Set before TensorFlow is imported: no
# oneDNN/absl/cpu-feature lines on stderr; TensorFlow's own (Eigen) CPU kernels instead of oneDNN's,
# which TF turns on by default on x86 (TF still picks kernels by the CPU's instruction set, so the
# last bits of a result can differ between machines); and one order for sets and str-keyed dicts.
QUIET_ENV = {'TF_CPP_MIN_LOG_LEVEL': '2', 'TF_ENABLE_ONEDNN_OPTS': '0', 'PYTHONHASHSEED': '0'}


def install_kernelspec(prefix: str | Path) -> Path:
    """Write the ``python3`` kernelspec of this interpreter into
    ``PREFIX/share/jupyter/kernels/python3`` with ipykernel's own writer, its command given
    ``KERNEL_ARGS`` and its environment ``QUIET_ENV``; a kernelspec already there is replaced.

    Returns the path of its ``kernel.json``.
    """
    from ipykernel.kernelspec import write_kernel_spec  # here: importers of QUIET_ENV skip it

    folder = Path(prefix) / 'share' / 'jupyter' / 'kernels' / 'python3'
    shutil.rmtree(folder, ignore_errors=True)  # ipykernel's writer copies into a new folder
    write_kernel_spec(folder, overrides={'env': QUIET_ENV}, extra_arguments=KERNEL_ARGS)
    return folder / 'kernel.json'


if __name__ == '__main__':
    if len(sys.argv) != 2:
        sys.exit('usage: python -m nbrun.kernel PREFIX')
    print(install_kernelspec(sys.argv[1]))
