"""run_workers: equal weights on a normal run, and no process left behind when anything fails.

The first test trains for real (two TensorFlow processes, ~10-20 s on 2 cores); the others fail
on purpose and must leave no worker alive.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from d2lhelpers import multiworker
from d2lhelpers.multiworker import WorkerError, WorkerTimeout, free_ports, run_workers, tf_config


def _alive(pid: int) -> bool:
    """True if ``pid`` still exists (a zombie counts: it was never reaped)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _stray_workers() -> list[int]:
    """Processes started from this test process that still run the worker script."""
    found = []
    for entry in Path('/proc').glob('[0-9]*'):
        try:
            cmdline = (entry / 'cmdline').read_bytes().decode(errors='replace')
            ppid = int((entry / 'stat').read_text().rsplit(')', 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if ppid == os.getpid() and multiworker.WORKER_SCRIPT.name in cmdline:
            found.append(int(entry.name))
    return found


def _assert_nothing_left(pids: list[int], n: int) -> None:
    assert len(pids) == n
    assert [pid for pid in pids if _alive(pid)] == []
    assert _stray_workers() == []


def test_two_workers_end_with_equal_weights():
    result = run_workers(2, steps=3, global_batch=32, deadline_s=180)
    assert result.exit_codes == [0, 0]
    assert result.equal and result.max_abs_diff == 0.0
    assert len(result.losses[0]) == 3 and result.losses[0] == result.losses[1]
    _assert_nothing_left(result.pids, 2)


def test_worker_that_fails_to_start_stops_the_others():
    with pytest.raises(WorkerError, match=r'worker 1 thoát với mã 2') as info:
        run_workers(2, worker_args={1: ['--no-such-option']}, deadline_s=60)
    err = info.value
    assert not isinstance(err, WorkerTimeout)
    assert err.exit_codes[1] == 2
    assert err.exit_codes[0] is not None and err.exit_codes[0] != 0  # killed, not left waiting
    assert 'unrecognized arguments' in err.stderr[1]
    _assert_nothing_left(err.pids, 2)


def test_missing_peer_is_killed_at_the_deadline():
    # Worker 1 starts far too late: worker 0 would wait for it forever.
    with pytest.raises(WorkerTimeout, match=r'quá hạn 5 s') as info:
        run_workers(2, worker_args={1: ['--delay-start', '600']}, deadline_s=5)
    assert info.value.exit_codes == [-9, -9]
    _assert_nothing_left(info.value.pids, 2)


def test_keyboard_interrupt_leaves_nothing_behind(monkeypatch):
    started = []

    def interrupt():
        started.extend(p for p in _stray_workers() if p not in started)
        raise KeyboardInterrupt

    monkeypatch.setattr(multiworker, '_pause', interrupt)
    with pytest.raises(KeyboardInterrupt):
        run_workers(2, deadline_s=60)
    _assert_nothing_left(started, 2)


def test_program_that_cannot_start_raises_and_leaves_nothing_behind(tmp_path):
    with pytest.raises(OSError):
        run_workers(2, python=str(tmp_path / 'no-such-python'))
    assert _stray_workers() == []


def test_bad_arguments_are_refused_before_any_start():
    with pytest.raises(ValueError, match='global_batch'):
        run_workers(2, global_batch=33)
    with pytest.raises(ValueError, match='deadline_s'):
        run_workers(2, deadline_s=0)
    with pytest.raises(TypeError, match='n_workers'):
        run_workers(2.0)
    with pytest.raises(ValueError, match='worker_args'):
        run_workers(2, worker_args={2: ['--steps', '1']})


def test_free_ports_and_tf_config():
    ports = free_ports(3)
    assert len(set(ports)) == 3 and all(0 < p < 65536 for p in ports)
    hosts = [f'127.0.0.1:{p}' for p in ports]
    assert tf_config(hosts, 2) == {
        'cluster': {'worker': hosts},
        'task': {'type': 'worker', 'index': 2},
    }
    with pytest.raises(ValueError, match='index'):
        tf_config(hosts, 3)
