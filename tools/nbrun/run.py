"""Running the planned jobs: each notebook in a worker process, one after the other (most
notebooks measure time, so none may run beside another), every ending accounted for.

``Batch(jobs, out=..., timeout=..., inplace=...)``; ``batch.run()`` runs them and returns one
summary entry per job (``batch.entries()`` gives them too, at any time after). The job runs in a
helper thread so that the main thread stays free for signals.

- Each runs in its own worker (``worker.py``), in a new session, with the project's kernel (a
  kernelspec made from ``nbrun.kernel`` in a private folder put first on JUPYTER_PATH, and
  ``QUIET_ENV``). The worker's status, progress, results and papermill's own output file live in
  that private folder (``tempfile.mkdtemp``, removed at the end), and so does its log until
  it ends; only complete files reach ``--out``, each written atomically, so two batches that
  share ``--out`` never see half a file of the other or delete one of its files.
- A notebook past ``timeout`` is ``timeout``; when it ends, however it ends, its worker, kernel
  and every process they started are killed (``processes.kill_run``).
- ``request_stop(reason)`` (safe in a signal handler: it only sets an attribute) stops the batch:
  the running notebooks are killed (``interrupted``), the others are ``not run``. An exception in
  the runner itself stops it the same way, then ``run()`` raises ``RunnerError``.

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
import threading
import time
import traceback
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat

from .atomic import atomic_write
from .kernel import QUIET_ENV, install_kernelspec
from .notebook import one_line, refreshed, write_notebook
from .plan import Job
from .processes import TOKEN_VAR, kill_run, new_token

__all__ = ['STATUSES', 'Batch', 'RunnerError']

STATUSES = ('ok', 'failed', 'timeout', 'interrupted', 'not run')
_POLL = 0.2  # seconds between two looks at request_stop() by the main loop


class RunnerError(RuntimeError):
    """An exception in the runner itself (not in a notebook); the batch was stopped."""


@dataclass
class _Running:
    popen: subprocess.Popen
    token: str
    stopped: bool = False  # killed because the batch stopped


@dataclass
class _Files:
    """Where one job's files go: ``output`` and ``log`` under --out, the rest private."""

    output: Path
    log: Path
    worker_log: Path  # the log while the notebook runs; copied to `log` at its end
    scratch: Path
    status: Path
    progress: Path
    results: Path


@dataclass
class Batch:
    jobs: list[Job]
    out: Path
    timeout: float = 1800.0
    inplace: bool = False
    echo: Any = field(default=None, repr=False)  # prints one progress line (default: print)

    def __post_init__(self) -> None:
        self.out = Path(self.out).resolve()
        self._lock = threading.Lock()
        self._entries: dict[str, dict[str, Any]] = {}
        self._running: dict[str, _Running] = {}
        self._stopping = False
        self._stop_request: str | None = None
        self._crash: tuple[str, BaseException, str] | None = None
        self._done = 0
        self._t0 = time.perf_counter()
        self._private: Path | None = None
        if self.echo is None:
            self.echo = _say

    # --- stopping --------------------------------------------------------------------------

    def request_stop(self, reason: str) -> None:
        """Stop the batch soon (``reason``: e.g. ``SIGINT``). Safe in a signal handler."""
        if self._stop_request is None:
            self._stop_request = reason

    @property
    def stop_reason(self) -> str | None:
        """``None`` while nothing stopped the batch, else why (a signal, ``runner error``)."""
        if self._stop_request is not None:
            return self._stop_request
        return 'runner error' if self._crash is not None else None

    def _stop(self) -> None:
        """Start nothing more; kill what runs."""
        with self._lock:
            self._stopping = True
            victims = list(self._running.values())
            for r in victims:
                r.stopped = True
        for r in victims:
            kill_run(r.popen, r.token)

    # --- the loop --------------------------------------------------------------------------

    def run(self) -> list[dict[str, Any]]:
        """Run every job (see the module's doc); return their summary entries."""
        self._t0 = time.perf_counter()
        self._private = Path(tempfile.mkdtemp(prefix='d2l-batch-'))
        try:
            env = self._environment(self._private)
            (self.out / 'logs').mkdir(parents=True, exist_ok=True)
            pending = deque(self.jobs)
            self.echo(
                f'{len(self.jobs)} notebook(s), one at a time; timeout {self.timeout:g} s each'
            )
            pool = ThreadPoolExecutor(1, thread_name_prefix='d2l-batch')
            running: dict[Future, Job] = {}
            try:
                while pending or running:
                    if self._stop_request is not None or self._crash is not None:
                        break
                    if pending and not running:
                        job = pending.popleft()
                        running[pool.submit(self._job, job, env)] = job
                    done, _ = wait(running, timeout=_POLL, return_when=FIRST_COMPLETED)
                    for future in done:
                        del running[future]
            except BaseException as err:  # the runner's own failure, or a bare Ctrl-C
                if self._stop_request is None:
                    interrupt = isinstance(err, KeyboardInterrupt)
                    self._stop_request = 'SIGINT' if interrupt else 'runner error'
                raise
            finally:
                self._stop()
                pool.shutdown(wait=True, cancel_futures=True)
        finally:
            shutil.rmtree(self._private, ignore_errors=True)
        if self._crash is not None:
            name, err, tb = self._crash
            raise RunnerError(f'runner error while running {name}:\n{tb}') from err
        return self.entries()

    def _environment(self, private: Path) -> dict[str, str]:
        install_kernelspec(private)
        jupyter_path = [
            str(private / 'share' / 'jupyter'),
            *filter(None, os.environ.get('JUPYTER_PATH', '').split(os.pathsep)),
        ]
        tools = str(Path(__file__).resolve().parents[1])  # so `python -m nbrun.worker` is found
        python_path = [tools, *filter(None, os.environ.get('PYTHONPATH', '').split(os.pathsep))]
        return {
            **os.environ,
            **QUIET_ENV,
            'JUPYTER_PATH': os.pathsep.join(jupyter_path),
            'PYTHONPATH': os.pathsep.join(python_path),
            'PYTHONUNBUFFERED': '1',
        }

    # --- one job ---------------------------------------------------------------------------

    def _job(self, job: Job, env: dict[str, str]) -> None:
        """Run ``job`` in a pool thread; never raises (a crash stops the batch)."""
        try:
            entry = self._run(job, env)
        except BaseException as err:  # noqa: BLE001 - reported by run()
            with self._lock:
                if self._crash is None:
                    self._crash = (job.name, err, traceback.format_exc())
            entry = self._entry(job)
            entry.update(
                status='failed',
                error=_error(None, 'RunnerError', f'{type(err).__name__}: {one_line(err)}'),
            )
        with self._lock:
            self._entries[job.name] = entry
            if entry['status'] != 'not run':
                self._done += 1
                self._print_done(entry)

    def _files(self, job: Job) -> _Files:
        n = self.jobs.index(job)
        assert self._private is not None
        return _Files(
            output=self.out / f'{job.slot}.ipynb',
            log=self.out / 'logs' / f'{job.slot}.log',
            worker_log=self._private / f'{n}.log',
            scratch=self._private / f'{n}.executed.ipynb',
            status=self._private / f'{n}.status.json',
            progress=self._private / f'{n}.progress.json',
            results=self._private / f'{n}.results.json',
        )

    def _run(self, job: Job, env: dict[str, str]) -> dict[str, Any]:
        files = self._files(job)
        files.output.parent.mkdir(parents=True, exist_ok=True)
        files.log.parent.mkdir(parents=True, exist_ok=True)
        parameters = dict(job.parameters)
        if job.wants_results:
            parameters['results_path'] = str(files.results)
        command = [
            sys.executable,
            '-m',
            'nbrun.worker',
            *('--source', str(job.source), '--output', str(files.output)),
            *('--scratch', str(files.scratch), '--status', str(files.status)),
            *('--progress', str(files.progress), '--cwd', str(job.source.parent)),
            *('--parameters', json.dumps(parameters)),
        ]
        token = new_token()
        with self._lock:  # a stop either sees this run registered, or it never starts
            if self._stopping:
                return self._entry(job)
            self.echo(f'{"":>{len(_bar(0, len(self.jobs))) + 1}}start   {job.name}')
            start, started_at = time.perf_counter(), time.time()
            with open(files.worker_log, 'wb') as log:
                popen = subprocess.Popen(
                    command,
                    env={**env, TOKEN_VAR: token},
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                )
            running = self._running[job.name] = _Running(popen, token)
        timed_out = False
        try:
            popen.wait(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            kill_run(popen, token)  # also a kernel or a child left behind by a normal end
            with self._lock:
                self._running.pop(job.name, None)
            atomic_write(files.log, files.worker_log.read_bytes())
        end = time.perf_counter()
        entry = self._entry(job)
        entry.update(
            seconds=round(end - start, 2),
            start=round(start - self._t0, 2),
            end=round(end - self._t0, 2),
            log=files.log.relative_to(self.out).as_posix(),
        )
        info = _read_json(files.status)
        if info is not None:
            entry.update(
                status=info['status'],
                error=info.get('error'),
                kernel_seconds=info.get('kernel_seconds'),
                environment=info.get('environment'),
            )
            if info.get('output'):
                entry['output'] = files.output.relative_to(self.out).as_posix()
        elif running.stopped:
            entry.update(
                status='interrupted',
                error=_error(
                    _read_json(files.progress),
                    'Interrupted',
                    f'the batch was stopped ({self.stop_reason}) while it ran',
                ),
            )
        elif timed_out:
            entry.update(
                status='timeout',
                error=_error(
                    _read_json(files.progress),
                    'Timeout',
                    f'killed after {self.timeout:g} s (--timeout)',
                ),
            )
        else:
            lines = files.worker_log.read_text(errors='replace').strip().splitlines()
            entry['error'] = _error(
                _read_json(files.progress),
                'WorkerDied',
                one_line(lines[-1]) if lines else f'exit status {popen.returncode}',
            )
        if entry['output'] is None:
            _remove_if_older(files.output, started_at)  # left by an earlier run
        if entry['status'] == 'ok' and job.wants_results and files.results.exists():
            try:
                entry['results'] = json.loads(files.results.read_text(encoding='utf-8'))
            except ValueError as err:
                entry['note'] = f'unreadable results file: {one_line(err)}'
        if self.inplace:
            self._refresh(job, entry, files.output)
        return entry

    def _refresh(self, job: Job, entry: dict[str, Any], output: Path) -> None:
        """--inplace: rewrite the committed notebook after a successful run (see cli)."""
        entry['refreshed'] = False
        if entry['status'] != 'ok':
            return
        if self._stopping:
            entry['note'] = 'not refreshed: the batch was stopped'
        elif hashlib.sha256(job.source.read_bytes()).hexdigest() != job.digest:
            entry['note'] = 'not refreshed: the notebook changed while it ran'
        else:
            try:
                fresh = refreshed(
                    nbformat.read(job.source, as_version=4), nbformat.read(output, as_version=4)
                )
                write_notebook(fresh, job.source)
                entry['refreshed'] = True
            except (OSError, ValueError) as err:
                entry['note'] = f'not refreshed: {one_line(err)}'

    # --- entries ---------------------------------------------------------------------------

    def _entry(self, job: Job) -> dict[str, Any]:
        """A job's summary entry before anything is known: ``not run``."""
        return {
            'notebook': job.name,
            'status': 'not run',
            'seconds': None,
            'error': None,
            'parameters': dict(job.parameters),
            'results': None,
            'start': None,
            'end': None,
            'kernel_seconds': None,
            'output': None,
            'log': None,
        }

    def entries(self) -> list[dict[str, Any]]:
        """One entry per job, in the order of the jobs."""
        with self._lock:
            done = {name: dict(e) for name, e in self._entries.items()}
        return [done.get(j.name) or self._entry(j) for j in self.jobs]

    def _print_done(self, entry: dict[str, Any]) -> None:
        why = ''
        if entry['error']:
            err = entry['error']
            cell = f' in cell {err["cell"]}' if err.get('cell') is not None else ''
            why = f'  {err["ename"]}{cell}: {err["evalue"]}'
            why = why if len(why) <= 200 else why[:199] + '…'
        self.echo(
            f'{_bar(self._done, len(self.jobs))} {entry["status"]:11} {entry["seconds"]:7.1f} s  '
            f'{entry["notebook"]}{why}'
        )
        if entry.get('note'):
            self.echo(f'{"":>{len(_bar(0, len(self.jobs))) + 1}}{entry["note"]}')


def _say(line: str) -> None:
    print(line, flush=True)


def _bar(done: int, total: int, width: int = 20) -> str:
    filled = width * done // max(total, 1)
    return f'[{"#" * filled}{"." * (width - filled)}] {done}/{total}'


def _error(where: dict[str, Any] | None, ename: str, evalue: str) -> dict[str, Any]:
    where = where or {}
    return {
        'cell': where.get('cell'),
        'cell_id': where.get('cell_id'),
        'ename': ename,
        'evalue': evalue,
    }


def _remove_if_older(path: Path, than: float) -> None:
    """Remove ``path`` if it was last written before ``than`` (not by a batch running now)."""
    try:
        if path.stat().st_mtime < than:
            path.unlink()
    except FileNotFoundError:
        pass


def _read_json(path: Path) -> Any:
    """The JSON in ``path`` (written atomically by the worker), or None if there is none."""
    try:
        return json.loads(path.read_text(encoding='utf-8'))
    except FileNotFoundError:
        return None
