"""run_workers: worker ports off the network, no process left when anything fails, the warnings.

What nbval does not see. It runs notebooks/data-parallel.ipynb, whose stored output says that the
two TensorFlow workers ended with exit code 0, equal weights and the private network; no worker
here imports TensorFlow. Two tests hold stand-in workers while they listen where TensorFlow's gRPC
servers would (every address, the port of ``TF_CONFIG``) and read the TCP socket tables of both
network namespaces: in the default mode (the private namespace on Linux) none of their sockets is
in ours; its control, ``isolate=False``, sees them. The others fail on purpose with a stand-in
that sleeps, fails or exits as its argument says. Every wait is for an event; no sleep serves as
synchronisation.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from d2lhelpers import multiworker
from d2lhelpers.multiworker import (
    SHARED_NOTE,
    NetworkIsolationError,
    WorkerError,
    WorkerTimeout,
    run_workers,
)

STANDIN_NAME = 'standin_worker.py'
SCRIPTS = (STANDIN_NAME, multiworker.LAUNCHER.name)
# A stand-in worker without TensorFlow: worker i does what its argument sys.argv[1 + i] says:
# 'fail' (exit 1 with a message), or sleep that many seconds, then exit 0 without a result.
STANDIN = """
import json, os, sys, time
index = json.loads(os.environ['TF_CONFIG'])['task']['index']
plan = sys.argv[1 + index]
if plan == 'fail':
    sys.exit(f'worker {index}: lỗi do test')
time.sleep(float(plan))
"""
SLEEPING = ['600', '600']  # both workers sleep far past any deadline, as a stuck worker would
REFUSED = 'unshare: unshare failed: Operation not permitted'  # e.g. Docker's default
# Stands in for the worker script without TensorFlow: listens where TF's gRPC server would (every
# address, the port of TF_CONFIG) until $MW_TEST_DIR/go exists, then writes a result and exits 0.
LISTEN = """
import json, os, socket, sys, time
d, config = os.environ['MW_TEST_DIR'], json.loads(os.environ['TF_CONFIG'])
index = config['task']['index']
server = socket.create_server(('', int(config['cluster']['worker'][index].rsplit(':', 1)[1])))
open(f'{d}/{os.getpid()}.up', 'x').close()
while not os.path.exists(d + '/go'):
    time.sleep(0.05)
with open(f'worker{index}.json', 'w') as f:
    json.dump({'losses': [1.0], 'weights': [[0.0, 0.0]]}, f)
"""


@pytest.fixture
def standin(tmp_path: Path) -> Path:
    script = tmp_path / STANDIN_NAME
    script.write_text(STANDIN)
    return script


@pytest.fixture(scope='module')
def isolated_here() -> bool:
    return subprocess.run([*multiworker.UNSHARE, 'true'], capture_output=True).returncode == 0


@pytest.fixture(params=[None, False], ids=['default', 'shared'])
def isolate(request: pytest.FixtureRequest) -> bool | None:
    return request.param


def _network(isolate: bool | None, isolated_here: bool) -> str:
    return 'isolated' if isolate is None and isolated_here else 'shared'


def _procs() -> dict[int, tuple[str, int, int, str]]:
    """pid: (state, ppid, session id, command line) of every process."""
    found = {}
    for entry in Path('/proc').glob('[0-9]*'):
        try:
            stat = (entry / 'stat').read_text().rsplit(')', 1)[1].split()
            cmdline = (entry / 'cmdline').read_bytes().decode(errors='replace')
        except (OSError, IndexError):
            continue
        found[int(entry.name)] = (stat[0], int(stat[1]), int(stat[3]), cmdline)
    return found


def _workers_under(pid: int) -> list[int]:
    """The workers started by a launcher that is a child of ``pid``."""
    procs = _procs()
    launchers = {p for p, (_, ppid, _, _) in procs.items() if ppid == pid}
    return sorted(
        p for p, (_, ppid, _, cmd) in procs.items() if ppid in launchers and SCRIPTS[0] in cmd
    )


def _assert_nothing_left(pids: list[int], n: int, launcher_pid: int | None) -> None:
    procs = _procs()
    assert len(pids) == n
    assert [pid for pid in pids if pid in procs] == []  # not even a zombie: reaped
    if launcher_pid is not None:
        assert [p for p, (_, _, sid, _) in procs.items() if sid == launcher_pid] == []
    ours = [p for p, (_, ppid, _, cmd) in procs.items() if ppid == os.getpid()]
    assert [p for p in ours if any(s in procs[p][3] for s in SCRIPTS)] == []


def _tcp_table(net: Path) -> list[tuple[str, int, str, int]]:
    """(local address hex, local port, state, inode) of every TCP socket of a network namespace."""
    rows = []
    for name in ('tcp', 'tcp6'):
        if (net / name).exists():
            for line in (net / name).read_text().splitlines()[1:]:
                fields = line.split()
                addr, port = fields[1].split(':')
                rows.append((addr, int(port, 16), fields[3], int(fields[9])))
    return rows


def _socket_inodes(pid: int) -> set[int]:
    links = [os.readlink(fd) for fd in Path(f'/proc/{pid}/fd').iterdir()]
    return {int(t[8:-1]) for t in links if t.startswith('socket:[')}


def _held_run(script: Path, args: list, isolate: bool | None, monkeypatch, tmp_path: Path) -> dict:
    """Run 2 workers of ``script`` (which writes ``<pid>.up`` and waits for ``go``); while both
    wait, read the socket tables of their namespace and of ours."""
    monkeypatch.setenv('MW_TEST_DIR', str(tmp_path))
    box: dict = {}

    def run() -> None:
        try:
            box['result'] = run_workers(script, 2, args=args, deadline_s=300, isolate=isolate)
        except BaseException as err:  # handed to the test's thread
            box['error'] = err

    thread = threading.Thread(target=run)
    thread.start()
    try:
        while len(ups := list(tmp_path.glob('*.up'))) < 2:  # both servers run, not training
            thread.join(0.05)
            assert thread.is_alive(), f'run_workers ended before its workers were up: {box!r}'
        pids = sorted(int(p.stem) for p in ups)
        box['ns'] = {os.readlink(f'/proc/{pid}/ns/net') for pid in pids}
        box['theirs'] = _tcp_table(Path(f'/proc/{pids[0]}/net'))
        box['ours'] = _tcp_table(Path('/proc/self/net'))
        box['sockets'] = _socket_inodes(pids[0]) | _socket_inodes(pids[1])
        box['pids'] = pids
    finally:
        (tmp_path / 'go').touch()
        thread.join()
    assert 'error' not in box, box['error']
    result = box['result']
    assert (sorted(result.pids), result.exit_codes) == (box['pids'], [0, 0])
    # The servers listen on every address (0.0.0.0 or ::), whatever TF_CONFIG's host says.
    servers = [r for r in box['theirs'] if r[2] == '0A' and r[3] in box['sockets']]  # 0A: LISTEN
    assert len(servers) >= 2 and all(set(r[0]) == {'0'} for r in servers), servers
    assert {int(h.rsplit(':', 1)[1]) for h in result.hosts} <= {r[1] for r in servers}
    assert len(box['ns']) == 1  # both workers share one namespace: they reach each other
    box['servers'] = servers
    _assert_nothing_left(result.pids, 2, result.launcher_pid)
    return box


def test_by_default_the_workers_run_off_the_network(isolated_here, tmp_path, monkeypatch, capsys):
    """Their servers listen on every address, yet not one of their sockets is in this process's
    network namespace; both workers share theirs (they reach each other), and nothing is left."""
    if sys.platform.startswith('linux'):
        assert isolated_here  # on Linux (CI) the default must be the private namespace
    script = tmp_path / 'listen.py'
    script.write_text(LISTEN)
    box = _held_run(script, [], None, monkeypatch, tmp_path)
    result = box['result']
    assert result.losses == [[1.0], [1.0]]
    warnings = [x for x in capsys.readouterr().err.splitlines() if x.startswith('CẢNH BÁO')]
    if isolated_here:
        assert result.network == 'isolated' and warnings == []
        assert box['ns'] != {os.readlink('/proc/self/ns/net')}
        assert box['sockets'].isdisjoint(r[3] for r in box['ours'])  # no socket of theirs at all
        assert str(result).endswith('; mạng: ' + multiworker.ISOLATED_NOTE)
    else:  # not Linux, or the namespace was refused: shared, with a warning
        assert result.network == 'shared' and len(warnings) == 1


def test_isolate_false_exposes_the_worker_ports(tmp_path, monkeypatch, capsys):
    """The control of the test above: the same reading does see the servers when they are
    exposed, and the warning names their ports."""
    script = tmp_path / 'listen.py'
    script.write_text(LISTEN)
    box = _held_run(script, [], False, monkeypatch, tmp_path)
    result = box['result']
    assert box['ns'] == {os.readlink('/proc/self/ns/net')}
    listening_here = {r[3] for r in box['ours'] if r[2] == '0A'}
    assert {r[3] for r in box['servers']} <= listening_here
    assert result.network == 'shared' and result.losses == [[1.0], [1.0]]
    assert str(result).endswith('; mạng: ' + SHARED_NOTE.format(reason='isolate=False'))
    p0, p1 = (h.rsplit(':', 1)[1] for h in result.hosts)
    assert capsys.readouterr().err.splitlines() == [
        'CẢNH BÁO: mạng không được cô lập (isolate=False). Trong tối đa 300 s, 2 worker '
        f'TensorFlow lắng nghe trên mọi địa chỉ mạng của máy này (0.0.0.0, cổng {p0}, {p1}), '
        'không có xác thực: ai kết nối được tới máy này có thể chạy lệnh trong các tiến trình '
        'đó.'
    ]


def test_worker_that_fails_stops_the_others(standin, isolate, isolated_here, capsys):
    with pytest.raises(WorkerError, match=r'worker 1 thoát với mã 1') as info:
        run_workers(standin, 2, args=['600', 'fail'], isolate=isolate, deadline_s=60)
    err = info.value
    assert not isinstance(err, WorkerTimeout)
    assert err.exit_codes == [-9, 1]  # worker 0 killed, not left waiting
    assert str(err).splitlines()[1:] == [
        '  worker 0: mã thoát -9',
        '  worker 1: mã thoát 1, log: worker 1: lỗi do test',
    ]
    assert err.network == _network(isolate, isolated_here)
    assert ('CẢNH BÁO' in capsys.readouterr().err) == (err.network == 'shared')
    _assert_nothing_left(err.pids, 2, err.launcher_pid)


def test_a_worker_that_writes_no_result_is_an_error(standin):
    with pytest.raises(WorkerError, match=r'worker \[0, 1\] thoát với mã 0 nhưng không ghi'):
        run_workers(standin, 2, args=['0', '0'], deadline_s=60)


def test_deadline_kills_every_worker(standin, isolate, isolated_here):
    # Both workers sleep far past the deadline, as a worker waiting forever for its peer would.
    with pytest.raises(
        WorkerTimeout, match=r'quá hạn 1.5 s: đã dừng \(SIGKILL\) worker \[0, 1\]'
    ) as info:
        run_workers(standin, 2, args=SLEEPING, isolate=isolate, deadline_s=1.5)
    assert info.value.exit_codes == [-9, -9]
    assert info.value.network == _network(isolate, isolated_here)
    _assert_nothing_left(info.value.pids, 2, info.value.launcher_pid)


def test_keyboard_interrupt_leaves_nothing_behind(standin, isolate):
    seen: dict = {}

    def interrupt() -> None:  # once both workers run, as a Jupyter "interrupt" would
        while len(seen.setdefault('pids', [])) < 2:
            time.sleep(0.02)  # polling for the event, not waiting for it to happen
            seen['pids'] = _workers_under(os.getpid())
        seen['sid'] = os.getsid(seen['pids'][0])  # the launcher's session
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

    # A kernel runs a cell with SIGINT raising KeyboardInterrupt. This process may have inherited
    # SIGINT ignored (a job started with `&` from a script does), so the test sets it, as a kernel.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Thread(target=interrupt, daemon=True).start()
        with pytest.raises(KeyboardInterrupt):
            run_workers(standin, 2, args=SLEEPING, isolate=isolate, deadline_s=60)
    finally:
        signal.signal(signal.SIGINT, previous)
    _assert_nothing_left(seen['pids'], 2, seen['sid'])


def test_workers_die_with_the_calling_process(standin, isolate):
    # run_workers' process is killed (SIGKILL: no finally runs): its launcher sees the end of its
    # stdin, kills the workers and removes the temporary folder.
    code = f'from d2lhelpers import run_workers; run_workers({str(standin)!r}, 2, '
    code += f'args={SLEEPING!r}, isolate={isolate!r})'
    caller = subprocess.Popen([sys.executable, '-c', code], cwd=Path(__file__).parents[2])
    while len(workers := _workers_under(caller.pid)) < 2:
        assert caller.poll() is None, 'run_workers ended before its workers started'
        time.sleep(0.02)
    sid = os.getsid(workers[0])
    out = Path(_procs()[sid][3].split('\0')[2])  # the launcher's argv: python, script, folder
    assert out.name.startswith('d2l-multiworker-') and out.is_dir()
    caller.kill()
    assert caller.wait() == -9
    deadline = time.monotonic() + 60  # a bound for a failing run, not a synchronisation
    # The orphans are reaped by PID 1, if it reaps at all: a zombie counts as ended here.
    while any(p[0] != 'Z' for pid, p in _procs().items() if pid in workers or p[2] == sid):
        assert time.monotonic() < deadline, 'a worker or the launcher outlived the caller'
        time.sleep(0.05)
    assert not out.exists()  # the launcher removed the caller's temporary folder


def test_refused_namespace_falls_back_with_a_warning(standin, monkeypatch, capsys):
    monkeypatch.setattr(multiworker, 'UNSHARE', [sys.executable, '-c', f'exit({REFUSED!r})'])
    with pytest.raises(WorkerError, match=r'worker 1 thoát với mã 1') as info:
        run_workers(standin, 2, args=['600', 'fail'], deadline_s=60)
    assert (info.value.network, info.value.exit_codes) == ('shared', [-9, 1])
    _assert_nothing_left(info.value.pids, 2, info.value.launcher_pid)
    (warning,) = capsys.readouterr().err.splitlines()
    assert warning.startswith(
        f'CẢNH BÁO: mạng không được cô lập (không tạo được network namespace riêng: {REFUSED}). '
        'Trong tối đa 60 s, 2 worker TensorFlow lắng nghe trên mọi địa chỉ mạng của máy này '
        '(0.0.0.0, cổng '
    )
    with pytest.raises(NetworkIsolationError, match='Operation not permitted') as info:
        run_workers(standin, 2, args=SLEEPING, isolate=True, deadline_s=60)
    assert info.value.pids == [] and capsys.readouterr().err == ''
    _assert_nothing_left([], 0, info.value.launcher_pid)


@pytest.mark.parametrize(
    'unshare, match',
    [(['env'], 'namespace mạng không riêng'), (['no-such-unshare'], 'không tìm thấy lệnh')],
    ids=['not-private', 'missing'],
)
def test_isolate_true_refuses_a_namespace_that_is_not_private(
    standin, monkeypatch, capsys, unshare, match
):
    monkeypatch.setattr(multiworker, 'UNSHARE', unshare)
    with pytest.raises(NetworkIsolationError, match=match) as info:
        run_workers(standin, 2, args=SLEEPING, isolate=True, deadline_s=60)
    assert capsys.readouterr().err == ''
    _assert_nothing_left([], 0, info.value.launcher_pid)


@pytest.mark.parametrize(
    'kwargs, error, match',
    [
        ({'deadline_s': float('nan')}, ValueError, 'tham số `deadline_s` phải là một số'),
        ({'n_workers': 0}, ValueError, 'n_workers'),
        ({'isolate': 1}, TypeError, 'isolate'),
        ({'args': '600 600'}, TypeError, 'args'),
        ({'script': 'no-such-worker.py'}, FileNotFoundError, 'no-such-worker.py'),
    ],
)
def test_bad_arguments_are_refused_before_any_start(standin, kwargs, error, match):
    kwargs = {'script': standin, 'args': SLEEPING, **kwargs}
    with pytest.raises(error, match=match):
        run_workers(**kwargs)
    _assert_nothing_left([], 0, None)


def test_result_text():
    w, hosts, note = [np.zeros(2, 'float32')], ['127.0.0.1:45003'] * 2, multiworker.ISOLATED_NOTE
    result = multiworker.WorkerResult([w, w], [[1.0]] * 2, [0, 0], [1, 2], hosts, 8.25, '', note, 3)
    assert str(result) == (
        '2 worker: mã thoát [0, 0], trọng số giống hệt nhau: True, max |w_i - w_0| = 0.0e+00, '
        '8.2 s; mạng: cô lập (network namespace riêng: cổng của các worker chỉ mở bên trong nó, '
        'không máy nào khác kết nối được)'
    )
    other = multiworker.WorkerResult([w, [w[0] + 0.5]], [], [], [], hosts, 1, '', '', 3)
    assert not other.equal and other.max_abs_diff == 0.5
