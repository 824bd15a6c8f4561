"""What the tests of the batch runner share (tests/tools/test_batch*.py and test_report.py).

The notebooks of ``tests/tools/nb/`` import nothing heavy (no TensorFlow); a test copies the ones
it needs into its own folder and runs the runner there as a user would, so nothing under
``tests/tools/nb/`` changes. Waiting is always for an event (a marker file a notebook writes, a
process that ends), never for a fixed time.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import psutil

NB = Path(__file__).parent / 'nb'


def copy(folder: Path, *names: str) -> None:
    """Copy ``tests/tools/nb/<name>.ipynb`` into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        shutil.copy(NB / f'{name}.ipynb', folder / f'{name}.ipynb')


def command(*args: str) -> list[str]:
    return [sys.executable, '-m', 'nbrun', *args]


def batch(folder: Path, *args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    """Run ``python -m nbrun ARGS`` in ``folder`` and wait for it."""
    return subprocess.run(
        command(*args), cwd=folder, capture_output=True, text=True, timeout=timeout
    )


def summary(out: Path) -> dict:
    return json.loads((out / 'summary.json').read_text(encoding='utf-8'))


def entries(out: Path) -> dict[str, dict]:
    return {e['notebook']: e for e in summary(out)['notebooks']}


def wait_for(path: Path, proc: subprocess.Popen | None = None, limit: float = 120) -> None:
    """Wait until ``path`` exists (fail if ``proc`` ends first, or after ``limit`` seconds)."""
    deadline = time.monotonic() + limit
    while not path.exists():
        if proc is not None and proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f'the batch ended before {path.name} appeared:\n{out}\n{err}')
        assert time.monotonic() < deadline, f'{path} did not appear in {limit} s'
        time.sleep(0.02)


def survivors(folder: Path) -> list[str]:
    """Live processes (not zombies, not this one) working in ``folder`` or below it.

    A notebook's kernel and the processes it starts work in the notebook's folder: after a
    batch there, none may be left.
    """
    folder = folder.resolve()
    found = []
    for proc in psutil.process_iter(['cwd', 'status', 'cmdline']):
        cwd = proc.info.get('cwd')
        if proc.pid == os.getpid() or not cwd or proc.info.get('status') == psutil.STATUS_ZOMBIE:
            continue
        if Path(cwd) == folder or folder in Path(cwd).parents:
            found.append(f'{proc.pid}: {" ".join(proc.info.get("cmdline") or [])}')
    return found


def new_notebook(path: Path, cells: list[tuple[str, list[str]]]) -> None:
    """A notebook of code cells ``(source, tags)``, written to ``path``."""
    nb = nbformat.v4.new_notebook(
        metadata={
            'kernelspec': {
                'display_name': 'Python 3 (ipykernel)',
                'language': 'python',
                'name': 'python3',
            },
            'language_info': {'name': 'python'},
        }
    )
    for i, (source, tags) in enumerate(cells):
        cell = nbformat.v4.new_code_cell(source, id=f'cell-{i}')
        if tags:
            cell.metadata['tags'] = tags
        nb.cells.append(cell)
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
