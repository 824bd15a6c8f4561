"""Running the planned jobs: each notebook in a worker process, one after the other (most
notebooks measure time, so none may run beside another), every ending accounted for.

``Batch(jobs, out=..., timeout=..., inplace=...)``; ``batch.run()`` runs them and returns one
``Entry`` per job (``batch.entries()`` gives them too, at any time after, also after a crash).

- Each runs in its own worker (``worker.py``), in a new session, with the project's kernel (a
  kernelspec made from ``nbrun.kernel`` in a private folder put first on JUPYTER_PATH, and
  ``QUIET_ENV``). The worker inherits the runner's PYTHONPATH and working folder, so it finds
  ``nbrun`` as the runner did (the Makefile puts ``tools/`` on PYTHONPATH). The worker's
  status, progress, results, its kernel's sockets and papermill's own output file live in that
  private folder (``tempfile.mkdtemp``, removed in every ending). Under ``--out`` go its log
  (written as it runs) and the executed notebook (written atomically once it ends); the executed
  notebook of an earlier run is removed first, so a notebook that ends without one has none.
- A notebook past ``timeout`` is ``timeout``; when it ends, however it ends, its worker, kernel
  and every process they started are killed (``processes.kill_run``).
- ``request_stop(reason)`` (safe in a signal handler: it only sets an attribute) stops the batch
  within ``_POLL`` seconds: the running notebook is killed (``interrupted``), the others are
  ``not run``. An exception in the runner itself (or a bare KeyboardInterrupt) stops it the same
  way (``stop_reason`` says ``runner error`` or ``SIGINT``), then ``run()`` raises it again.

Statuses: ``ok``, ``failed``, ``timeout``, ``interrupted``, ``not run``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import nbformat

from .kernel import QUIET_ENV, install_kernelspec
from .notebook import one_line, refreshed, write_notebook
from .plan import Job
from .processes import TOKEN_VAR, kill_run, new_token
from .report import marked_outputs
from .summary import Entry, ErrorInfo

__all__ = ['Batch']

_POLL = 0.2  # seconds between two looks at request_stop() while a notebook runs


@dataclass
class _Files:
    """Where one job's files go: ``output`` and ``log`` under --out, the rest private."""

    output: Path
    log: Path
    scratch: Path
    status: Path
    progress: Path
    results: Path
    sockets: Path  # the kernel's Unix sockets


@dataclass
class Batch:
    jobs: list[Job]
    out: Path
    timeout: float = 1800.0
    inplace: bool = False

    def __post_init__(self) -> None:
        self.out = Path(self.out).resolve()
        self._entries: dict[str, Entry] = {}
        self._stop_request: str | None = None

    def request_stop(self, reason: str) -> None:
        """Stop the batch soon (``reason``: e.g. ``SIGINT``). Safe in a signal handler."""
        if self._stop_request is None:
            self._stop_request = reason

    @property
    def stop_reason(self) -> str | None:
        """``None`` while nothing stopped the batch, else why (a signal, ``runner error``)."""
        return self._stop_request

    def _crashed(self, err: BaseException) -> None:
        self.request_stop('SIGINT' if isinstance(err, KeyboardInterrupt) else 'runner error')

    def entries(self) -> list[Entry]:
        """One entry per job, in the order of the jobs (``not run`` for those not run)."""
        return [replace(self._entries.get(j.name) or _entry(j)) for j in self.jobs]

    # --- the loop --------------------------------------------------------------------------

    def run(self) -> list[Entry]:
        """Run every job, one after the other (see the module's doc); return their entries."""
        private = Path(tempfile.mkdtemp(prefix='nbrun-'))
        try:
            env = self._environment(private)
            _say(f'{len(self.jobs)} notebook(s), one at a time; timeout {self.timeout:g} s each')
            for n, job in enumerate(self.jobs):
                if self._stop_request is not None:
                    break
                try:
                    entry = self._run(job, env, _files(self.out, private, job, n))
                except BaseException as err:  # the runner's own failure, or a bare Ctrl-C
                    self._crashed(err)
                    raise
                self._entries[job.name] = entry
                self._print_done(n + 1, entry)
        finally:
            shutil.rmtree(private, ignore_errors=True)
        return self.entries()

    def _environment(self, private: Path) -> dict[str, str]:
        install_kernelspec(private)
        jupyter_path = [
            str(private / 'share' / 'jupyter'),
            *filter(None, os.environ.get('JUPYTER_PATH', '').split(os.pathsep)),
        ]
        return {
            **os.environ,
            **QUIET_ENV,
            'JUPYTER_PATH': os.pathsep.join(jupyter_path),
            'PYTHONUNBUFFERED': '1',
        }

    # --- one job ---------------------------------------------------------------------------

    def _run(self, job: Job, env: dict[str, str], files: _Files) -> Entry:
        """Run one job in its worker and kill what is left of it; its entry, however it ended."""
        token = new_token()
        _say(f'{"":>{len(_bar(0, len(self.jobs))) + 1}}start   {job.name}')
        _prepare(files)
        start = time.perf_counter()
        entry = _entry(job)
        popen = _launch(_command(job, files), {**env, TOKEN_VAR: token}, files.log)
        ending = None  # 'timeout', 'interrupted', or None: the worker ended by itself
        try:
            ending = self._wait(popen, start)
        except BaseException as err:
            self._crashed(err)
            ending = 'interrupted'
            raise
        finally:  # also a kernel or a child left behind by a normal end
            kill_run(popen, token)
            entry.seconds = round(time.perf_counter() - start, 2)
            entry.log = files.log.relative_to(self.out).as_posix()
            if ending is not None:
                self._killed(entry, ending, files.progress)
                self._entries[job.name] = entry  # a crash still reports it
        if ending is None:
            self._read_status(entry, files, popen.returncode)
        _load_results(entry, job, files.results)
        if self.inplace:
            self._refresh(job, entry, files.output)
        return entry

    def _wait(self, popen: subprocess.Popen, start: float) -> str | None:
        """Wait for the worker: None once it has ended by itself, else why it must be killed
        (``interrupted``: ``request_stop``; ``timeout``)."""
        while not _ended(popen, _POLL):
            if self._stop_request is not None:
                return 'interrupted'
            if time.perf_counter() - start > self.timeout:
                return 'timeout'
        return None

    def _killed(self, entry: Entry, ending: str, progress: Path) -> None:
        """A worker killed before it ended (``timeout`` or ``interrupted``): where it was."""
        if ending == 'timeout':
            why = f'killed after {self.timeout:g} s (--timeout)'
        else:
            why = f'the batch was stopped ({self.stop_reason}) while it ran'
        entry.status = ending
        entry.error = ErrorInfo(**_read_json(progress) or {}, ename=ending.capitalize(), evalue=why)

    def _read_status(self, entry: Entry, files: _Files, returncode: int | None) -> None:
        """A worker that ended by itself: what its STATUS file says, or, without one (the worker
        died), ``failed`` with the last line of its log."""
        info = _read_json(files.status)
        if info is None:
            lines = files.log.read_text(errors='replace').strip().splitlines()
            entry.status = 'failed'
            entry.error = ErrorInfo(
                **_read_json(files.progress) or {},
                ename='WorkerDied',
                evalue=one_line(lines[-1]) if lines else f'exit status {returncode}',
            )
            return
        entry.status = info['status']
        entry.error = info['error'] and ErrorInfo(**info['error'])
        entry.kernel_seconds = info.get('kernel_seconds')
        if info.get('output'):
            entry.output = files.output.relative_to(self.out).as_posix()
            entry.headline = _headline(files.output)

    def _refresh(self, job: Job, entry: Entry, output: Path) -> None:
        """--inplace: rewrite the committed notebook after a successful run (see cli)."""
        entry.refreshed = False
        if entry.status != 'ok':
            return
        if self._stop_request is not None:
            entry.note = 'not refreshed: the batch was stopped'
        elif hashlib.sha256(job.source.read_bytes()).hexdigest() != job.digest:
            entry.note = 'not refreshed: the notebook changed while it ran'
        else:
            try:
                fresh = refreshed(
                    nbformat.read(job.source, as_version=4), nbformat.read(output, as_version=4)
                )
                write_notebook(fresh, job.source)
                entry.refreshed = True
            except (OSError, ValueError) as err:
                entry.note = f'not refreshed: {one_line(err)}'

    def _print_done(self, done: int, entry: Entry) -> None:
        why = f'  {entry.error}' if entry.error else ''
        why = why if len(why) <= 200 else why[:199] + '…'
        _say(
            f'{_bar(done, len(self.jobs))} {entry.status:11} {entry.seconds or 0:7.1f} s  '
            f'{entry.notebook}{why}'
        )
        if entry.note:
            _say(f'{"":>{len(_bar(0, len(self.jobs))) + 1}}{entry.note}')


def _entry(job: Job) -> Entry:
    """A job's entry before anything is known: ``not run``."""
    return Entry(notebook=job.name, parameters=dict(job.parameters))


def _files(out: Path, private: Path, job: Job, n: int) -> _Files:
    return _Files(
        output=out / job.name,
        log=out / 'logs' / Path(job.name).with_suffix('.log'),
        scratch=private / f'{n}.executed.ipynb',
        status=private / f'{n}.status.json',
        progress=private / f'{n}.progress.json',
        results=private / f'{n}.results.json',
        sockets=private / f'{n}.sockets',
    )


def _command(job: Job, files: _Files) -> list[str]:
    """The worker's command line (``worker.py``)."""
    parameters = dict(job.parameters)
    if job.wants_results:
        parameters['results_path'] = str(files.results)
    return [
        sys.executable,
        '-m',
        'nbrun.worker',
        *('--source', str(job.source), '--output', str(files.output)),
        *('--scratch', str(files.scratch), '--status', str(files.status)),
        *('--progress', str(files.progress), '--cwd', str(job.source.parent)),
        *('--sockets', str(files.sockets)),  # in the private folder: removed in every ending
        *('--parameters', json.dumps(parameters)),
    ]


def _prepare(files: _Files) -> None:
    """The folders of the job's files under --out, without an earlier run's executed notebook."""
    files.output.parent.mkdir(parents=True, exist_ok=True)
    files.output.unlink(missing_ok=True)
    files.log.parent.mkdir(parents=True, exist_ok=True)


def _launch(command: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    """The worker, in a session of its own, writing to ``log``."""
    with open(log, 'wb') as out:
        return subprocess.Popen(
            command,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )


def _ended(popen: subprocess.Popen, seconds: float) -> bool:
    """Wait up to ``seconds`` for the worker; True once it has ended."""
    try:
        popen.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        return False
    return True


def _load_results(entry: Entry, job: Job, path: Path) -> None:
    """The results an ``ok`` notebook saved (a note when they cannot be read)."""
    if entry.status != 'ok' or not job.wants_results or not path.exists():
        return
    try:
        entry.results = json.loads(path.read_text(encoding='utf-8'))
    except ValueError as err:
        entry.note = f'unreadable results file: {one_line(err)}'


def _headline(output: Path) -> str | None:
    try:
        return marked_outputs(nbformat.read(output, as_version=4)).headline or None
    except (OSError, ValueError):
        return None


def _say(line: str) -> None:
    print(line, flush=True)


def _bar(done: int, total: int, width: int = 20) -> str:
    filled = width * done // max(total, 1)
    return f'[{"#" * filled}{"." * (width - filled)}] {done}/{total}'


def _read_json(path: Path) -> Any:
    """The JSON in ``path`` (written atomically by the worker), or None if there is none."""
    try:
        return json.loads(path.read_text(encoding='utf-8'))
    except FileNotFoundError:
        return None
