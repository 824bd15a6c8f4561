"""The processes of one notebook's run, found and killed with psutil (Linux, macOS, Windows).

A run is a worker process (``python -m nbrun.worker``), the Jupyter kernel it
starts and whatever the notebook starts in turn. The kernel runs in a session of its own, so a
process-group kill would miss it, and a process the notebook started may outlive its parent.
A run's processes are therefore found two ways: the worker's descendants, and every process
whose environment holds the run's token (``TOKEN_VAR``, set in the worker's environment and
inherited by the kernel and its children, even once they are orphaned).

- ``new_token()``: a token for one run;
- ``run_processes(pid, token)``: the live processes of a run (not the worker itself);
- ``kill_run(popen, token)``: SIGKILL the worker and all of them, wait until they are gone;
- ``alive(pid)``: the process exists and is not a zombie (killed, waiting to be reaped).
"""

from __future__ import annotations

import os
import subprocess
import time
import uuid

import psutil

__all__ = ['TOKEN_VAR', 'new_token', 'run_processes', 'kill_run', 'alive']

TOKEN_VAR = 'D2L_BATCH_TOKEN'


def new_token() -> str:
    """A token no other run has: this process's pid and a random part, after the token of the
    run this process belongs to, if any (``gpucheck``'s batch: its kill finds every notebook's
    processes too)."""
    own = f'{os.getpid()}-{uuid.uuid4().hex[:12]}'
    return f'{os.environ[TOKEN_VAR]}/{own}' if os.environ.get(TOKEN_VAR) else own


def _gone(proc: psutil.Process) -> bool:
    try:
        return proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True
    except psutil.AccessDenied:
        return False


def alive(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie."""
    try:
        return not _gone(psutil.Process(pid))
    except psutil.NoSuchProcess:
        return False


def run_processes(pid: int, token: str) -> list[psutil.Process]:
    """The live descendants of ``pid`` and the processes whose environment carries ``token``,
    or a token of a run inside it (``token/...``)."""
    found: dict[int, psutil.Process] = {}
    try:
        found.update((p.pid, p) for p in psutil.Process(pid).children(recursive=True))
    except psutil.NoSuchProcess:
        pass
    for proc in psutil.process_iter(['environ']):
        environ = proc.info.get('environ') or {}  # None where access is denied
        carried = environ.get(TOKEN_VAR) or ''
        if carried == token or carried.startswith(token + '/'):
            found.setdefault(proc.pid, proc)
    found.pop(os.getpid(), None)
    found.pop(pid, None)
    return [p for p in found.values() if not _gone(p)]


def kill_run(popen: subprocess.Popen, token: str, grace: float = 5.0) -> list[int]:
    """SIGKILL the worker ``popen`` and every process of its run; return the pids killed.

    Looks again after each round (a process may have started one more meanwhile) until none is
    left, waits up to ``grace`` seconds for the killed ones to be gone (zombies count as gone),
    and reaps the worker. Safe to call when everything has already ended, and from two threads.
    """
    killed: set[int] = set()
    deadline = time.monotonic() + grace
    while True:
        procs = run_processes(popen.pid, token)
        if popen.poll() is None:
            try:
                procs.append(psutil.Process(popen.pid))
            except psutil.NoSuchProcess:
                pass
        if not procs:
            break
        for proc in procs:
            try:
                proc.kill()
                killed.add(proc.pid)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                pass
        popen.poll()
        while time.monotonic() < deadline and not all(_gone(p) for p in procs):
            time.sleep(0.01)
            popen.poll()
        if time.monotonic() >= deadline:
            break
    popen.wait()
    return sorted(killed)
