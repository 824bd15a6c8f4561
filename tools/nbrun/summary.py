"""``OUT/summary.json``: what a batch did, written in every ending (TensorFlow-free).

Top level: ``command``, ``commit`` (``git rev-parse --short HEAD`` of the repository holding the
notebooks, or null), ``timeout``, ``inplace``, ``ending`` (``finished``, ``SIGINT``,
``SIGTERM`` or ``runner error``), ``runner_error`` (its traceback, or null), ``started`` (local
time, ISO 8601), ``wall_seconds``, ``counts`` (notebooks per status), ``load_average``
(``start``, ``end``: 1-minute load), ``machine`` (OS, Python, cores), ``environment`` (what
TensorFlow sees: ``env_report().as_dict()`` from a fresh interpreter, once the report is
written; else null), ``report_seconds`` (once a report is written), and ``notebooks``: one
``Entry`` per notebook, in the order of the command line (see ``Entry``).
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from nbrun.atomic import atomic_write

from .kernel import QUIET_ENV

__all__ = [
    'Entry',
    'ErrorInfo',
    'machine',
    'environment',
    'load_average',
    'make_summary',
    'write_summary',
]


@dataclass(kw_only=True)
class ErrorInfo:
    """Why a notebook did not end ``ok``: the ``error`` of its entry in summary.json.

    ``ename`` is the exception's name, or the runner's word for how the notebook ended
    (``Timeout``, ``Interrupted``, ``WorkerDied``); ``evalue`` is one line. ``cell`` is the index
    of the cell in the committed notebook and ``cell_id`` its id: the cell that failed, or the one
    that was running when the notebook was stopped (null if none had started).
    """

    cell: int | None = None
    cell_id: str | None = None
    ename: str
    evalue: str

    def __str__(self) -> str:
        where = f' (ô {self.cell})' if self.cell is not None else ''
        return f'{self.ename}{where}: {self.evalue}'


@dataclass
class Entry:
    """What one notebook of a batch did: one item of ``notebooks`` in summary.json."""

    notebook: str  # its path relative to the current folder (else absolute)
    status: str = 'not run'  # ok, failed, timeout, interrupted, not run
    seconds: float | None = None  # the runner's time for it (null if not run)
    error: ErrorInfo | None = None  # null if ok
    parameters: dict[str, Any] = field(default_factory=dict)  # as given (not results_path)
    results: Any = None  # the JSON it saved with save_results to its results_path
    headline: str | None = None  # the text printed by its cells tagged report-headline
    kernel_seconds: float | None = None  # papermill's duration
    output: str | None = None  # the executed notebook, relative to summary.json's folder
    log: str | None = None  # its log, likewise
    refreshed: bool | None = None  # --inplace: whether the committed notebook was rewritten
    note: str | None = None  # where something deserves one

    def as_dict(self) -> dict[str, Any]:
        """The entry as summary.json holds it."""
        return asdict(self)


def machine() -> dict[str, Any]:
    """What the runner knows without TensorFlow: OS, Python, and the cores this process may use
    (its CPU affinity on Linux, all cores elsewhere)."""
    affinity = getattr(os, 'sched_getaffinity', None)
    return {
        'platform': platform.platform(),
        'python': platform.python_version(),
        'cores': len(affinity(0)) if affinity else os.cpu_count() or 1,
    }


def load_average() -> float | None:
    """The 1-minute load average (None where the system has none)."""
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def environment(timeout: float = 300) -> dict[str, Any]:
    """``env_report().as_dict()`` of this machine, from a fresh interpreter (it imports TF)."""
    code = (
        'import json; from d2lhelpers import env_report; '
        'print(json.dumps(env_report().as_dict(), default=str))'
    )
    try:
        out = subprocess.run(
            [sys.executable, '-c', code],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, **QUIET_ENV},
            check=True,
        ).stdout
        return json.loads(out.strip().splitlines()[-1])
    except subprocess.CalledProcessError as err:
        tail = (err.stderr or '').strip().splitlines()
        return {'error': f'environment report failed: {tail[-1] if tail else err}'}
    except (subprocess.SubprocessError, OSError, ValueError, IndexError) as err:
        return {'error': f'environment report failed: {err}'}


def make_summary(entries: list[Entry], **run: Any) -> dict[str, Any]:
    """The summary of a batch: ``run`` (the top-level fields) and the ``entries``."""
    counts: dict[str, int] = {}
    for e in entries:
        counts[e.status] = counts.get(e.status, 0) + 1
    return {
        **run,
        'counts': counts,
        'environment': None,
        'notebooks': [e.as_dict() for e in entries],
    }


def write_summary(summary: dict[str, Any], out: Path) -> Path:
    """Write ``out/summary.json`` atomically; return its path."""
    text = json.dumps(summary, indent=2, ensure_ascii=False, default=str) + '\n'
    Path(out).mkdir(parents=True, exist_ok=True)  # even when nothing ran
    return atomic_write(Path(out) / 'summary.json', text)
