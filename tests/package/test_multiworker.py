"""run_workers: equal weights, worker ports off the network, no process left when anything fails.

Two tests train for real (two TensorFlow processes each, ~5-10 s on 2 cores): one in the default
mode, which must be the private network namespace on Linux, and one with ``isolate=False``, the
shared network. While their workers hold (after their gRPC servers started, before training) the
tests read the TCP socket tables of this process's network namespace and of the workers' one:
no traffic is sent anywhere. The other tests fail on purpose, in both modes, with workers that
never import TensorFlow (a bad argument, or ``--delay-start 600``), and must leave no process.

Every wait is for an event (a file a worker or the launcher writes, a process that ends); no
sleep serves as synchronisation.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from d2lhelpers import multiworker
from d2lhelpers.multiworker import (
    NetworkIsolationError,
    WorkerError,
    WorkerResult,
    WorkerTimeout,
    free_ports,
    run_workers,
    tf_config,
)

SCRIPTS = (multiworker.WORKER_SCRIPT.name, multiworker.LAUNCH_SCRIPT.name)
LISTEN = '0A'  # TCP_LISTEN in /proc/net/tcp
SLEEPING = ['--delay-start', '600']  # a worker that sleeps before importing TensorFlow
# What `unshare` prints and does where the kernel refuses user namespaces (e.g. Docker's default).
REFUSING_UNSHARE = [
    sys.executable,
    '-c',
    'import sys; sys.exit("unshare: unshare failed: Operation not permitted")',
]


@pytest.fixture(scope='module')
def isolation_refused() -> str | None:
    """Why this machine refuses the private network namespace (None: it allows it)."""
    return multiworker._probe_isolation()


@pytest.fixture(params=[None, False], ids=['default', 'shared'])
def isolate(request: pytest.FixtureRequest) -> bool | None:
    return request.param


def _expected_network(isolate: bool | None, refused: str | None) -> str:
    return 'isolated' if isolate is None and refused is None else 'shared'


# --- processes ---------------------------------------------------------------------------------


def _stat(pid: int) -> list[str] | None:
    """Fields of /proc/PID/stat after the command name (state first), or None if PID is gone."""
    try:
        return Path(f'/proc/{pid}/stat').read_text().rsplit(')', 1)[1].split()
    except (OSError, IndexError):
        return None


def _alive(pid: int) -> bool:
    """True if ``pid`` still exists (a zombie counts: it was never reaped)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _gone(pid: int) -> bool:
    """True if ``pid`` has ended: it no longer exists, or it is a zombie (ended, not yet reaped)."""
    stat = _stat(pid)
    return stat is None or stat[0] == 'Z'


def _ours() -> list[int]:
    """Children of this test process that run the launcher or worker script."""
    found = []
    for entry in Path('/proc').glob('[0-9]*'):
        stat = _stat(int(entry.name))
        try:
            cmdline = (entry / 'cmdline').read_bytes().decode(errors='replace')
        except OSError:
            continue
        if stat is not None and int(stat[1]) == os.getpid() and any(s in cmdline for s in SCRIPTS):
            found.append(int(entry.name))
    return found


def _session(sid: int) -> list[int]:
    """Every process in session ``sid`` (the launcher's session holds its workers)."""
    return [
        int(e.name)
        for e in Path('/proc').glob('[0-9]*')
        if (st := _stat(int(e.name))) is not None and int(st[3]) == sid
    ]


def _assert_nothing_left(pids: list[int], n: int, launcher_pid: int | None) -> None:
    assert len(pids) == n
    assert [pid for pid in pids if _alive(pid)] == []
    if launcher_pid is not None:
        assert not _alive(launcher_pid)
        assert _session(launcher_pid) == []
    assert _ours() == []


# --- sockets -----------------------------------------------------------------------------------


def _tcp_table(net: Path) -> list[tuple[str, int, str, int]]:
    """(local address hex, local port, state, inode) of every TCP socket of a network namespace,
    read from its ``/proc/PID/net/tcp`` and ``tcp6`` (``/proc/self/net``: this process's one)."""
    rows = []
    for name in ('tcp', 'tcp6'):
        try:
            lines = (net / name).read_text().splitlines()[1:]
        except FileNotFoundError:  # no IPv6
            continue
        for line in lines:
            fields = line.split()
            addr, port = fields[1].split(':')
            rows.append((addr, int(port, 16), fields[3], int(fields[9])))
    return rows


def _socket_inodes(pid: int) -> set[int]:
    inodes = set()
    for fd in Path(f'/proc/{pid}/fd').iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith('socket:['):
            inodes.add(int(target[8:-1]))
    return inodes


def _wait_for_files(paths: list[Path], thread: threading.Thread, box: dict) -> None:
    """Wait until every file of ``paths`` exists; fail if the run ended first."""
    while not all(p.exists() for p in paths):
        thread.join(0.05)  # returns at once if the run ended
        if not thread.is_alive():
            pytest.fail(f'run_workers ended before its workers were up: {box!r}')


# --- the two real training runs ----------------------------------------------------------------


def test_training_run_ports_visibility_and_equal_weights(
    isolate, isolation_refused, tmp_path, capsys
):
    network = _expected_network(isolate, isolation_refused)
    if isolate is None and sys.platform.startswith('linux'):
        # On Linux (CI) the default must be the private namespace: a refusal is a failure here.
        assert isolation_refused is None, isolation_refused
    go = tmp_path / 'go'
    ups = [tmp_path / f'up{i}.json' for i in range(2)]
    args = {i: ['--signal-up', str(ups[i]), '--wait-for', str(go)] for i in range(2)}
    box: dict = {}

    def run() -> None:
        try:
            box['result'] = run_workers(
                2, steps=3, global_batch=32, deadline_s=300, isolate=isolate, worker_args=args
            )
        except BaseException as err:  # handed to the test's thread
            box['error'] = err

    thread = threading.Thread(target=run)
    thread.start()
    try:
        _wait_for_files(ups, thread, box)  # both gRPC servers are running, training has not begun
        up = [json.loads(p.read_text()) for p in ups]
        pids = [u['pid'] for u in up]
        ports = {int(u['host'].rsplit(':', 1)[1]) for u in up}
        ns = {os.readlink(f'/proc/{pid}/ns/net') for pid in pids}
        theirs = _tcp_table(Path(f'/proc/{pids[0]}/net'))
        ours = _tcp_table(Path('/proc/self/net'))
        worker_sockets = _socket_inodes(pids[0]) | _socket_inodes(pids[1])
        # In the workers' own namespace, their servers listen on the ports of TF_CONFIG, on every
        # address (0.0.0.0 or ::), whatever TF_CONFIG's host says: the reason for this issue.
        servers = [r for r in theirs if r[2] == LISTEN and r[1] in ports]
        assert {r[1] for r in servers} == ports
        assert {r[3] for r in servers} <= worker_sockets
        assert all(set(r[0]) == {'0'} for r in servers), servers
        listening_here = {r[3] for r in ours if r[2] == LISTEN}
        assert len(ns) == 1  # both workers share one namespace: they reach each other
        if network == 'isolated':
            assert ns != {os.readlink('/proc/self/ns/net')}
            assert {r[3] for r in servers}.isdisjoint(listening_here)
            assert worker_sockets.isdisjoint(r[3] for r in ours)  # no socket of theirs at all
        else:  # the control: the same reading does see the servers when they are exposed
            assert ns == {os.readlink('/proc/self/ns/net')}
            assert {r[3] for r in servers} <= listening_here
    finally:
        go.touch()
        thread.join()
    assert 'error' not in box, box['error']
    result = box['result']
    assert result.network == network
    assert result.pids == pids
    assert result.exit_codes == [0, 0]
    assert result.equal and result.max_abs_diff == 0.0
    assert len(result.losses[0]) == 3 and result.losses[0] == result.losses[1]
    assert all(math.isfinite(v) for v in result.losses[0])
    _assert_nothing_left(result.pids, 2, result.launcher_pid)

    err = capsys.readouterr().err
    warnings = [line for line in err.splitlines() if line.startswith('CẢNH BÁO')]
    text = str(result)
    if network == 'isolated':
        assert warnings == []
        assert text.endswith('; mạng: ' + multiworker.ISOLATED_NOTE)
        assert 'mạng: cô lập' in text
    else:
        p0, p1 = (h.rsplit(':', 1)[1] for h in result.hosts)
        assert warnings == [
            'CẢNH BÁO: mạng không được cô lập (isolate=False). Trong tối đa 300 s, 2 worker '
            f'TensorFlow lắng nghe trên mọi địa chỉ mạng của máy này (0.0.0.0, cổng {p0}, {p1}), '
            'không có xác thực: ai kết nối được tới máy này có thể chạy lệnh trong các tiến trình '
            'đó.'
        ]
        assert 'mạng: dùng chung với máy (isolate=False)' in text
    for value in [*result.pids, result.launcher_pid, *(h.rsplit(':', 1)[1] for h in result.hosts)]:
        assert str(value) not in text.replace(f'{result.elapsed_s:.1f} s', '')


# --- failures, in both modes, without TensorFlow -----------------------------------------------


def test_worker_that_fails_to_start_stops_the_others(isolate, isolation_refused, capsys):
    with pytest.raises(WorkerError, match=r'worker 1 thoát với mã 2') as info:
        run_workers(
            2, isolate=isolate, worker_args={0: SLEEPING, 1: ['--no-such-option']}, deadline_s=60
        )
    err = info.value
    assert not isinstance(err, WorkerTimeout)
    assert err.exit_codes == [-9, 2]  # worker 0 killed, not left waiting
    assert 'unrecognized arguments' in err.stderr[1]
    assert str(err).splitlines()[1:] == [
        '  worker 0: mã thoát -9',
        '  worker 1: mã thoát 2, stderr: multiworker_worker.py: error: unrecognized arguments: '
        '--no-such-option',
    ]
    assert err.network == _expected_network(isolate, isolation_refused)
    assert ('CẢNH BÁO' in capsys.readouterr().err) == (err.network == 'shared')
    _assert_nothing_left(err.pids, 2, err.launcher_pid)


def test_deadline_kills_every_worker(isolate, isolation_refused):
    # Both workers sleep far past the deadline, as a worker waiting forever for its peer would.
    with pytest.raises(
        WorkerTimeout, match=r'quá hạn 2 s: đã dừng \(SIGKILL\) worker \[0, 1\]'
    ) as info:
        run_workers(2, isolate=isolate, worker_args={0: SLEEPING, 1: SLEEPING}, deadline_s=2)
    assert info.value.exit_codes == [-9, -9]
    assert info.value.network == _expected_network(isolate, isolation_refused)
    _assert_nothing_left(info.value.pids, 2, info.value.launcher_pid)


def test_keyboard_interrupt_leaves_nothing_behind(isolate, monkeypatch):
    seen: dict = {}

    def interrupt(pids: list[int]) -> None:  # called once every worker has started
        seen['pids'] = list(pids)
        seen['sids'] = {os.getsid(pid) for pid in pids}
        raise KeyboardInterrupt

    monkeypatch.setattr(multiworker, '_on_started', interrupt)
    with pytest.raises(KeyboardInterrupt):
        run_workers(2, isolate=isolate, worker_args={0: SLEEPING, 1: SLEEPING}, deadline_s=60)
    (sid,) = seen['sids']  # both workers in the launcher's session
    _assert_nothing_left(seen['pids'], 2, sid)


def test_workers_die_with_the_calling_process(isolate, tmp_path):
    # run_workers' process is killed (SIGKILL: no finally runs): its launcher sees the end of its
    # stdin and kills the workers.
    code = f"""
import json, os, signal, sys
from d2lhelpers import multiworker
def die(pids):
    with open({str(tmp_path / 'pids.json')!r}, 'w') as f:
        json.dump({{'pids': pids, 'sid': os.getsid(pids[0])}}, f)
    os.kill(os.getpid(), signal.SIGKILL)
multiworker._on_started = die
multiworker.run_workers(2, isolate={isolate!r}, worker_args={{0: {SLEEPING!r}, 1: {SLEEPING!r}}})
"""
    done = subprocess.run(
        [sys.executable, '-c', code], cwd=Path(__file__).parents[2], capture_output=True
    )
    assert done.returncode == -9, done.stderr
    info = json.loads((tmp_path / 'pids.json').read_text())
    deadline = time.monotonic() + 60  # a bound for a failing run, not a synchronisation
    # The orphans are reaped by PID 1, if it reaps at all: a zombie counts as ended here.
    while not all(_gone(pid) for pid in [*info['pids'], info['sid']]):
        if time.monotonic() > deadline:
            pytest.fail('a worker or the launcher outlived the calling process')
        time.sleep(0.05)


# --- falling back ------------------------------------------------------------------------------


def test_refused_namespace_falls_back_with_a_warning(monkeypatch, capsys):
    monkeypatch.setattr(multiworker, 'UNSHARE', REFUSING_UNSHARE)
    assert multiworker._probe_isolation() == (
        'không tạo được network namespace riêng: unshare: unshare failed: Operation not permitted'
    )
    with pytest.raises(WorkerError, match=r'worker 1 thoát với mã 2') as info:
        run_workers(2, worker_args={0: SLEEPING, 1: ['--no-such-option']}, deadline_s=60)
    assert info.value.network == 'shared'
    assert info.value.exit_codes == [-9, 2]
    _assert_nothing_left(info.value.pids, 2, info.value.launcher_pid)
    (warning,) = capsys.readouterr().err.splitlines()
    assert warning.startswith(
        'CẢNH BÁO: mạng không được cô lập (không tạo được network namespace riêng: unshare: '
        'unshare failed: Operation not permitted). Trong tối đa 60 s, 2 worker TensorFlow lắng '
        'nghe trên mọi địa chỉ mạng của máy này (0.0.0.0, cổng '
    )

    with pytest.raises(NetworkIsolationError, match='Operation not permitted') as info:
        run_workers(2, isolate=True, worker_args={0: SLEEPING, 1: SLEEPING}, deadline_s=60)
    assert info.value.pids == []
    assert capsys.readouterr().err == ''
    assert _ours() == []


def test_namespace_that_is_not_private_is_refused(monkeypatch, capsys):
    # `unshare` that does nothing: the launcher sees this machine's interfaces up and refuses.
    probe = [sys.executable, str(multiworker.LAUNCH_SCRIPT), '--probe']
    if not sys.platform.startswith('linux') or subprocess.run(probe).returncode == 0:
        pytest.skip('no network interface besides lo is up here')
    monkeypatch.setattr(multiworker, 'UNSHARE', ['env'])
    with pytest.raises(NetworkIsolationError, match='namespace mạng không riêng'):
        run_workers(2, isolate=True, worker_args={0: SLEEPING, 1: SLEEPING}, deadline_s=60)
    assert capsys.readouterr().err == ''
    assert _ours() == []


def test_missing_unshare_command(monkeypatch):
    monkeypatch.setattr(multiworker, 'UNSHARE', ['no-such-unshare-command', '--net'])
    assert multiworker._probe_isolation() in (
        'không tìm thấy lệnh `no-such-unshare-command`',
        f'{sys.platform} không có network namespace của Linux',
    )
    with pytest.raises(NetworkIsolationError, match='no-such-unshare-command|network namespace'):
        run_workers(2, isolate=True)


# --- arguments and helpers ---------------------------------------------------------------------


def test_program_that_cannot_start_raises_and_leaves_nothing_behind(tmp_path):
    with pytest.raises(OSError):
        run_workers(2, python=str(tmp_path / 'no-such-python'))
    assert _ours() == []


@pytest.mark.parametrize(
    'kwargs, error, match',
    [
        ({'global_batch': 33}, ValueError, 'global_batch'),
        ({'deadline_s': 0}, ValueError, 'deadline_s'),
        ({'deadline_s': -1.0}, ValueError, 'deadline_s'),
        ({'deadline_s': float('nan')}, ValueError, 'deadline_s'),
        ({'deadline_s': float('inf')}, ValueError, 'deadline_s'),
        ({'deadline_s': float('-inf')}, ValueError, 'deadline_s'),
        ({'deadline_s': '5'}, TypeError, 'deadline_s'),
        ({'deadline_s': True}, TypeError, 'deadline_s'),
        ({'isolate': 'yes'}, TypeError, 'isolate'),
        ({'isolate': 1}, TypeError, 'isolate'),
        ({'worker_args': {2: ['--steps', '1']}}, ValueError, 'worker_args'),
        ({'worker_args': {True: ['--steps', '1']}}, ValueError, 'worker_args'),
        ({'worker_args': {0: '--steps 1'}}, TypeError, 'worker_args'),
        ({'seed': -1}, ValueError, 'seed'),
    ],
)
def test_bad_arguments_are_refused_before_any_start(kwargs, error, match):
    with pytest.raises(error, match=match):
        run_workers(2, **kwargs)
    assert _ours() == []


def test_bad_n_workers_is_refused():
    with pytest.raises(TypeError, match='n_workers'):
        run_workers(2.0)


def test_result_text_names_the_network_and_no_pid_or_port():
    w = [np.zeros(2, 'float32')]
    common = dict(
        weights=[w, w],
        losses=[[1.0], [1.0]],
        exit_codes=[0, 0],
        pids=[12345, 12346],
        hosts=['127.0.0.1:45003', '127.0.0.1:49907'],
        elapsed_s=8.25,
        launcher_pid=12344,
    )
    isolated = WorkerResult(**common, network='isolated', network_note=multiworker.ISOLATED_NOTE)
    assert str(isolated) == (
        '2 worker: mã thoát [0, 0], trọng số giống hệt nhau: True, max |w_i - w_0| = 0.0e+00, '
        '8.2 s; mạng: cô lập (network namespace riêng: cổng của các worker chỉ mở bên trong nó, '
        'không máy nào khác kết nối được)'
    )
    shared = WorkerResult(
        **common,
        network='shared',
        network_note=multiworker.SHARED_NOTE.format(reason='isolate=False'),
    )
    assert str(shared).endswith(
        '; mạng: dùng chung với máy (isolate=False): trong lúc chạy, cổng của các worker mở cho '
        'mọi ai kết nối được tới máy này'
    )
    for text in (str(isolated), str(shared)):
        assert not any(s in text for s in ('12344', '12345', '12346', '45003', '49907'))


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
