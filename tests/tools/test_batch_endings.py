"""Every way a batch can be stopped ends the same: no process of it survives, and
``summary.json`` says what happened to each notebook.

A real batch (``hang.ipynb``: a kernel blocked in native code with a child process, then
``ok.ipynb``, one at a time) is stopped once ``hang.here`` says the kernel and its child run:
by SIGINT (once, and twice), by SIGTERM, and by an exception in the runner while it waits; an
exception before a notebook starts stops the batch too. (A notebook's own failure and its
timeout are in test_batch.py.)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from batch_support import command, copy, entries, summary, survivors, wait_for
from nbrun import cli, run
from nbrun.processes import TOKEN_VAR, alive, kill_run, new_token


def assert_stopped(tmp_path, pids: dict[str, int], ending: str) -> dict[str, dict]:
    """Nothing of the batch runs any more, and its summary says how it ended."""
    assert not alive(pids['kernel']), 'the kernel survived'
    assert not alive(pids['child']), 'a process the notebook started survived'
    assert survivors(tmp_path) == []
    top = summary(tmp_path / 'out')
    assert top['ending'] == ending
    return entries(tmp_path / 'out')


ENDINGS = {  # case: signals sent, exit status
    'SIGINT': ([signal.SIGINT], 130),
    'SIGINT-twice': ([signal.SIGINT, signal.SIGINT], 130),
    'SIGTERM': ([signal.SIGTERM], 143),
}


def test_a_signal_stops_the_batch(tmp_path):
    """The three endings at once, each in a folder of its own."""
    procs = {}
    try:
        for case in ENDINGS:
            folder = tmp_path / case
            copy(folder, 'hang', 'ok')
            with open(folder / 'stderr.txt', 'w') as err:
                procs[case] = subprocess.Popen(
                    command('hang.ipynb', 'ok.ipynb', '--out', 'out'),
                    cwd=folder,
                    stdout=subprocess.PIPE,
                    stderr=err,
                    text=True,
                )
        for case, (signals, _) in ENDINGS.items():
            folder, proc = tmp_path / case, procs[case]
            wait_for(folder / 'hang.here', proc)
            proc.send_signal(signals[0])
            if len(signals) > 1:  # the second one while the first is being handled
                while 'stopping' not in (folder / 'stderr.txt').read_text():
                    if proc.poll() is not None:
                        break  # then its stderr says it, as checked below
                    time.sleep(0.005)
                proc.send_signal(signals[1])  # does nothing if it has ended meanwhile
        outputs = {case: proc.communicate(timeout=120)[0] for case, proc in procs.items()}
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    for case, (signals, status) in ENDINGS.items():
        folder, name = tmp_path / case, signal.Signals(signals[0]).name
        stderr = (folder / 'stderr.txt').read_text()
        assert procs[case].returncode == status, (case, outputs[case], stderr)
        assert f'{name}: stopping' in stderr and f'stopped ({name})' in stderr, case
        got = assert_stopped(folder, json.loads((folder / 'hang.here').read_text()), name)
        hang, ok = got['hang.ipynb'], got['ok.ipynb']
        assert hang['status'] == 'interrupted' and hang['error']['ename'] == 'Interrupted'
        assert hang['error']['cell_id'] in ('record-pids', 'native-hang')
        assert f'({name})' in hang['error']['evalue'] and hang['log'] == 'logs/hang.log'
        assert (folder / 'out' / 'logs' / 'hang.log').is_file()
        assert ok['status'] == 'not run' and ok['seconds'] is None and ok['error'] is None
        assert summary(folder / 'out')['counts'] == {'interrupted': 1, 'not run': 1}
        assert not (folder / 'out' / 'report.md').exists()  # a stopped batch has no report


def test_an_exception_in_the_runner_stops_the_batch(tmp_path, monkeypatch, capsys):
    """The runner fails while it waits for ``hang.ipynb`` (once its kernel and child run)."""
    copy(tmp_path, 'hang', 'ok')
    monkeypatch.chdir(tmp_path)
    real = run._ended

    def failing_wait(*args, **kwargs):
        if (tmp_path / 'hang.here').exists():
            raise OSError('disk on fire')
        return real(*args, **kwargs)

    monkeypatch.setattr(run, '_ended', failing_wait)
    handler = signal.getsignal(signal.SIGINT)
    with pytest.raises(OSError, match='disk on fire'):
        cli.main(['hang.ipynb', 'ok.ipynb', '--out', 'out'])
    got = assert_stopped(tmp_path, json.loads((tmp_path / 'hang.here').read_text()), 'runner error')
    assert got['hang.ipynb']['status'] == 'interrupted'
    assert '(runner error)' in got['hang.ipynb']['error']['evalue']
    assert got['ok.ipynb']['status'] == 'not run'
    assert 'OSError: disk on fire' in summary(tmp_path / 'out')['runner_error']
    assert 'stopped (runner error)' in capsys.readouterr().err
    assert signal.getsignal(signal.SIGINT) is handler  # restored


def test_an_exception_before_a_notebook_starts_stops_the_batch(tmp_path, monkeypatch, capsys):
    """The runner fails before the first notebook starts: nothing is run, and it says why."""
    copy(tmp_path, 'ok', 'raises')
    monkeypatch.chdir(tmp_path)

    def no_token():
        raise RuntimeError('no token today')

    monkeypatch.setattr(run, 'new_token', no_token)
    with pytest.raises(RuntimeError, match='no token today'):
        cli.main(['ok.ipynb', 'raises.ipynb', '--out', 'out'])
    top = summary(tmp_path / 'out')
    assert top['ending'] == 'runner error' and 'no token today' in top['runner_error']
    assert top['counts'] == {'not run': 2}
    assert not (tmp_path / 'out' / 'ok.ipynb').exists()
    assert 'stopped (runner error)' in capsys.readouterr().err


@pytest.mark.parametrize('inner', ['', '/4242-inner'])
def test_kill_run_finds_orphans_by_their_token(inner):
    """A worker, its child, and a grandchild whose parent has exited (reparented); their token is
    the run's, or that of a run inside it (gpucheck's batch, then one notebook's run)."""
    token = new_token()
    script = textwrap.dedent(
        """
        import subprocess, sys
        child = subprocess.Popen(['sleep', '600'])
        shell = 'sleep 600 >/dev/null 2>&1 & echo $!'  # its parent, sh, exits at once
        orphan = subprocess.run(['sh', '-c', shell], capture_output=True, text=True)
        print(child.pid, orphan.stdout.strip(), flush=True)
        sys.stdin.read()
        """
    )
    worker = subprocess.Popen(
        [sys.executable, '-c', script],
        env={**os.environ, TOKEN_VAR: token + inner},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        child, orphan = map(int, worker.stdout.readline().split())
        assert alive(child) and alive(orphan)
        killed = kill_run(worker, token)
        assert {worker.pid, child, orphan} <= set(killed)
        assert not any(alive(pid) for pid in (worker.pid, child, orphan))
        assert worker.returncode == -signal.SIGKILL
        assert kill_run(worker, token) == []  # nothing left: a no-op
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()


def test_a_run_inside_a_run_extends_its_token(monkeypatch):
    monkeypatch.delenv(TOKEN_VAR, raising=False)
    outer = new_token()
    monkeypatch.setenv(TOKEN_VAR, outer)
    inner = new_token()
    assert inner.startswith(outer + '/') and inner != outer + '/'
