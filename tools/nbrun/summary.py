"""``OUT/summary.json``: what a batch did, written in every ending (TensorFlow-free).

Top level: ``command``, ``commit`` (of the repository, or null), ``timeout``, ``inplace``,
``ending`` (``finished``, ``SIGINT``,
``SIGTERM`` or ``runner error``), ``runner_error`` (its traceback, or null), ``started`` (local
time, ISO 8601), ``wall_seconds``, ``counts`` (notebooks per status), ``load_average``
(``start``, ``end``: 1-minute load), ``machine`` (OS, Python, cores), ``environment`` (what
TensorFlow saw: ``env_report().as_dict()`` from the first notebook that imported it, else null
until the report fills it in), ``report_seconds`` (once a report is written), and
``notebooks``: one entry per notebook, in the order of the command line:

``notebook`` (its path), ``status`` (``ok``, ``failed``, ``timeout``, ``interrupted``,
``not run``), ``seconds`` (null if not run), ``error`` (``cell``: index in the committed notebook,
``cell_id``, ``ename``, ``evalue``: one line; null when ok), ``parameters`` (as given; not
``results_path``), ``results`` (the JSON the notebook saved with ``save_results`` to its
``results_path``, or null), ``headline`` (the text of its ``report-headline`` cells, once the
report is written), ``start`` and ``end`` (seconds since the batch started),
``kernel_seconds`` (papermill's duration), ``output`` and ``log`` (paths relative to the
folder of ``summary.json``, or null);
with ``--inplace``, ``refreshed``; ``note`` where something deserves one.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

from .atomic import atomic_write
from .kernel import QUIET_ENV, available_cores

__all__ = ['machine', 'environment', 'load_average', 'make_summary', 'write_summary']


def machine() -> dict[str, Any]:
    """What the runner knows without TensorFlow: OS, Python, cores."""
    return {
        'platform': platform.platform(),
        'python': platform.python_version(),
        'cores': available_cores(),
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


def make_summary(entries: list[dict[str, Any]], **run: Any) -> dict[str, Any]:
    """The summary of a batch: ``run`` (the top-level fields) and the ``entries``.

    The ``environment`` an entry carries (from its kernel) is taken out of every entry; the
    first one becomes the summary's.
    """
    entries = [dict(e) for e in entries]
    reported = [e.pop('environment', None) for e in entries]
    counts: dict[str, int] = {}
    for e in entries:
        counts[e['status']] = counts.get(e['status'], 0) + 1
    return {
        **run,
        'counts': counts,
        'environment': next((r for r in reported if r), None),
        'notebooks': entries,
    }


def write_summary(summary: dict[str, Any], out: Path) -> Path:
    """Write ``out/summary.json`` atomically; return its path."""
    text = json.dumps(summary, indent=2, ensure_ascii=False, default=str) + '\n'
    return atomic_write(Path(out) / 'summary.json', text)
