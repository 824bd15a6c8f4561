"""Which GPUs the NVIDIA driver shows, without TensorFlow (standard library only).

    python3 tools/gpucheck/driver.py    # exit 0 and list them; exit 3 with a skip line if none

``make gpu-check`` asks this first, with any Python, before it builds an environment: no GPU in
the driver means nothing to check (skip, exit 0). A GPU in the driver means the check must run on
TensorFlow's GPU build, and ``python -m gpucheck`` fails (never skips) if TensorFlow cannot use
it. ``GPUCHECK_DRIVER_GPUS`` (lines separated by ``;``) replaces what the driver says: the seam
the tests use to play a GPU machine on a machine without one.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

FAKE = 'GPUCHECK_DRIVER_GPUS'
PROC = Path('/proc/driver/nvidia/gpus')
NONE = 3  # exit status of the command line when the driver shows no GPU


def driver_gpus() -> list[str]:
    """One line per GPU: ``nvidia-smi -L``'s lines, else the PCI ids under /proc/driver/nvidia."""
    if FAKE in os.environ:
        return [line.strip() for line in os.environ[FAKE].split(';') if line.strip()]
    exe = shutil.which('nvidia-smi')
    if exe is not None:
        try:
            out = subprocess.run([exe, '-L'], capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.SubprocessError):
            out = ''
        lines = [line.strip() for line in out.splitlines() if line.startswith('GPU ')]
        if lines:
            return lines
    if PROC.is_dir():
        return [f'GPU tại PCI {p.name} ({PROC})' for p in sorted(PROC.iterdir())]
    return []


def main() -> int:
    gpus = driver_gpus()
    if not gpus:
        print(
            'gpu-check: bỏ qua — không có GPU (driver NVIDIA không thấy GPU nào: '
            f'nvidia-smi -L và {PROC} đều trống)'
        )
        return NONE
    print('gpu-check: driver thấy ' + '; '.join(gpus))
    return 0


if __name__ == '__main__':
    sys.exit(main())
