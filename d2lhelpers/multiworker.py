"""``run_workers``: ``n_workers`` processes of ``multiworker_worker.py`` (a training loop under
``MultiWorkerMirroredStrategy``), each with a ``TF_CONFIG`` naming 127.0.0.1 ports. The network:
TensorFlow's gRPC server listens on ``0.0.0.0:PORT`` whatever ``TF_CONFIG`` says, without
authentication: whoever reaches the port runs ops in the worker. So the workers run in a private
user + network namespace (``unshare --map-root-user --net``) whose only interface is its own
loopback; where the OS refuses, on the machine's network, after one warning line on stderr naming
the open ports (``isolate=True`` raises ``NetworkIsolationError`` instead). The processes: this
file, run as a script, is the launcher (standard library only, inside the namespace). It starts
the workers, and kills them all (SIGKILL: it cannot be caught, so nothing delays the end) and reaps
them as soon as one fails or its stdin ends: ``run_workers`` closes it at ``deadline_s``, on any
exception or KeyboardInterrupt, and the OS does when the caller dies. No process outlives the call.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

WORKER_SCRIPT = Path(__file__).with_name('multiworker_worker.py')
UNSHARE = ['unshare', '--map-root-user', '--net']  # then exec the launcher: it keeps the pid
ISOLATED_NOTE = (
    'cô lập (network namespace riêng: cổng của các worker chỉ mở bên trong nó, '
    'không máy nào khác kết nối được)'
)
SHARED_NOTE = (
    'dùng chung với máy ({reason}): trong lúc chạy, cổng của các worker mở cho mọi ai kết nối '
    'được tới máy này'
)
WARNING = (
    'CẢNH BÁO: mạng không được cô lập ({reason}). Trong tối đa {deadline_s:g} s, {n} worker '
    'TensorFlow lắng nghe trên mọi địa chỉ mạng của máy này (0.0.0.0, cổng {ports}), không có '
    'xác thực: ai kết nối được tới máy này có thể chạy lệnh trong các tiến trình đó.'
)
_POLL_S, _STOP_GRACE_S = 0.05, 10.0  # s


class WorkerError(RuntimeError):
    """A worker failed (or the deadline passed); every worker has been killed and reaped."""

    def __init__(self, message, *, pids, exit_codes, stderr, network=None, launcher_pid=None):
        super().__init__(message)
        self.pids, self.exit_codes, self.stderr = pids, exit_codes, stderr
        self.network, self.launcher_pid = network, launcher_pid


class WorkerTimeout(WorkerError):
    """The deadline passed before every worker had finished."""


class NetworkIsolationError(WorkerError):
    """``isolate=True``, but the OS refused the private network namespace; no worker started."""


@dataclass(frozen=True)
class WorkerResult:
    weights: list[list]  # weights[i]: worker i's model.get_weights() (NumPy arrays)
    losses: list[list[float]]  # losses[i][step]: the global loss worker i saw
    exit_codes: list[int]
    pids: list[int]
    hosts: list[str]  # the cluster, as in TF_CONFIG
    elapsed_s: float
    network: str  # 'isolated' or 'shared'
    network_note: str  # the same in Vietnamese words
    launcher_pid: int

    @property
    def max_abs_diff(self) -> float:
        import numpy as np

        pairs = [
            (a, b) for ws in self.weights[1:] for a, b in zip(ws, self.weights[0], strict=True)
        ]
        return max((float(np.max(np.abs(a - b))) for a, b in pairs), default=0.0)

    @property
    def equal(self) -> bool:  # bit for bit (a NaN is not equal to itself)
        return all(len(w) == len(self.weights[0]) for w in self.weights) and not self.max_abs_diff

    def __str__(self) -> str:  # no pid, no port: a notebook's stored output must stay the same
        return (
            f'{len(self.weights)} worker: mã thoát {self.exit_codes}, '
            f'trọng số giống hệt nhau: {self.equal}, max |w_i - w_0| = {self.max_abs_diff:.1e}, '
            f'{self.elapsed_s:.1f} s; mạng: {self.network_note}'
        )


def tf_config(hosts: Sequence[str], index: int) -> dict:
    """The ``TF_CONFIG`` of worker ``index`` in a cluster of ``hosts`` (``"host:port"`` each)."""
    if not 0 <= index < len(hosts):
        raise ValueError(f'`index` phải nằm trong [0, {len(hosts)}), nhận được {index}')
    return {'cluster': {'worker': list(hosts)}, 'task': {'type': 'worker', 'index': index}}


def _hosts(n: int) -> list[str]:
    """``n`` distinct free ports on 127.0.0.1 (all sockets open at once), as ``host:port``."""
    socks = [socket.create_server(('127.0.0.1', 0)) for _ in range(n)]
    hosts = [f'127.0.0.1:{s.getsockname()[1]}' for s in socks]
    for s in socks:
        s.close()
    return hosts


def _json(path: Path, data: object = None) -> object:
    """Write ``data`` to ``path`` (read only once the launcher has ended), or read it (None)."""
    if data is not None:
        return path.write_text(json.dumps(data), encoding='utf-8')
    try:
        return json.loads(path.read_text(encoding='utf-8'))
    except FileNotFoundError:
        return None


def _tail(path: Path, lines: int = 3) -> str:
    try:
        return '\n'.join(path.read_text(errors='replace').strip().splitlines()[-lines:])
    except OSError:
        return ''


# --- the launcher (run as a script: standard library only) -------------------------------------


def _private_loopback(caller_ns: str) -> None:
    """Check that this is a namespace of its own, bring ``lo`` up and check TCP on it."""
    import fcntl
    import struct

    if os.readlink('/proc/self/ns/net') == caller_ns:
        raise OSError('namespace mạng không riêng: đây là mạng của máy')
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:  # ioctls of <linux/sockios.h>
        flags = struct.unpack('16sH22x', fcntl.ioctl(s, 0x8913, struct.pack('16sH22x', b'lo', 0)))
        fcntl.ioctl(s, 0x8914, struct.pack('16sH22x', b'lo', flags[1] | 1))  # IFF_UP
    with socket.create_server(('127.0.0.1', 0)) as server:
        socket.create_connection(server.getsockname(), timeout=10).close()


def _launch(out: Path, spec: dict) -> int:
    stop: list[int] = []  # a flag set by SIGTERM/SIGHUP/SIGINT: Popen is never cut half-way
    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(signum, lambda signum, frame: stop.append(signum))
    try:
        if spec['caller_ns']:
            _private_loopback(spec['caller_ns'])
    except OSError as err:
        sys.exit(f'không dựng được mạng riêng: {err}')
    (out / 'net-ready').touch()
    hosts = spec['hosts'] or _hosts(len(spec['cmds']))
    procs: list[subprocess.Popen] = []
    orphaned = False  # stdin ended without the caller's word: the caller died, nobody cleans up
    try:
        for i, cmd in enumerate(spec['cmds']):
            env = {**os.environ, 'TF_CONFIG': json.dumps(tf_config(hosts, i))}
            with open(out / f'worker{i}.stderr', 'w') as f:
                procs.append(subprocess.Popen(cmd, env=env, stdin=-3, stdout=f, stderr=f))
        _json(out / 'launch.json', {'pids': [p.pid for p in procs], 'hosts': hosts})
        while not stop and all(p.poll() in (None, 0) for p in procs):
            if all(p.poll() == 0 for p in procs):
                break
            if select.select([sys.stdin], [], [], _POLL_S)[0]:  # the caller's word, or its end
                orphaned = not os.read(0, 4096)
                break
    finally:  # every way out: no worker outlives the launcher
        killed = [i for i, p in enumerate(procs) if p.poll() is None]
        for p in procs:
            p.kill()  # does nothing to a process that has ended
            p.wait()
    codes = [p.returncode for p in procs]
    failed = next((i for i, c in enumerate(codes) if c and i not in killed), None)
    _json(out / 'status.json', {'codes': codes, 'failed': failed, 'killed': killed})
    if orphaned:
        shutil.rmtree(out, ignore_errors=True)
    return 0


# --- the caller's side ---------------------------------------------------------------------------


def _stop(proc: subprocess.Popen) -> None:
    """Stop the launcher (a byte, then EOF; EOF alone: we died) and reap it, or SIGKILL it."""
    try:
        if not proc.stdin.closed:  # a second call only waits
            proc.stdin.write(b'.')
        proc.stdin.close()
        proc.wait(_STOP_GRACE_S)
    except (subprocess.TimeoutExpired, BrokenPipeError):  # BrokenPipeError: it had ended
        pass
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def run_workers(
    n_workers: int = 2,
    *,
    steps: int = 5,
    global_batch: int = 64,
    seed: int = 0,
    deadline_s: float = 120.0,
    cpu_only: bool = True,
    isolate: bool | None = None,
    worker_args: Mapping[int, Sequence[str]] | None = None,
) -> WorkerResult:
    """Train one small model with ``n_workers`` processes. ``deadline_s`` bounds the run
    (``WorkerTimeout``); ``worker_args``: extra arguments, e.g. ``{1: ['--delay-start', '60']}``;
    ``isolate``: None (private network, or shared with a warning), True, False (shared)."""
    from .checks import check_int, check_seconds

    n_workers = check_int('n_workers', n_workers, 1)
    steps, seed = check_int('steps', steps, 1), check_int('seed', seed, 0)
    if check_int('global_batch', global_batch, 1) % n_workers:
        raise ValueError(f'tham số `global_batch` phải chia hết cho {n_workers}: {global_batch}')
    deadline_s = check_seconds('deadline_s', deadline_s)
    if not (isolate is None or isinstance(isolate, bool)):
        raise TypeError(f'tham số `isolate` phải là None, True hoặc False, nhận được {isolate!r}')
    worker_args = dict(worker_args or {})
    bad = [i for i, a in worker_args.items() if isinstance(a, (str, bytes)) or type(i) is not int]
    if bad or not all(0 <= i < n_workers for i in worker_args):
        raise ValueError(f'tham số `worker_args` phải là {{worker: [tham số]}}: {worker_args!r}')

    env = {**os.environ, 'TF_CPP_MIN_LOG_LEVEL': '2', 'TF_ENABLE_ONEDNN_OPTS': '0'}
    env |= {'CUDA_VISIBLE_DEVICES': ''} if cpu_only else {}
    with tempfile.TemporaryDirectory(prefix='d2l-multiworker-') as tmp:
        out, launcher, start, py = Path(tmp), None, time.monotonic(), sys.executable
        args = [py, str(WORKER_SCRIPT), '--out', tmp, '--steps', str(steps), '--seed', str(seed)]
        args += ['--global-batch', str(global_batch)]
        cmds = [args + [str(a) for a in worker_args.get(i, [])] for i in range(n_workers)]

        def watch(prefix: list[str], caller_ns: str | None, hosts: list | None) -> bool:
            nonlocal launcher  # the launcher, in its own session, its stdin a pipe only we hold
            spec = json.dumps({'cmds': cmds, 'caller_ns': caller_ns, 'hosts': hosts})
            with open(out / 'launcher.log', 'w') as f:
                launcher = subprocess.Popen(
                    [*prefix, py, str(Path(__file__).resolve()), tmp, spec],
                    env=env, stdin=subprocess.PIPE, stdout=f, stderr=f, start_new_session=True,
                )  # fmt: skip
            try:  # Popen.wait(timeout) polls: a KeyboardInterrupt gets through
                launcher.wait(start + deadline_s - time.monotonic())
            except subprocess.TimeoutExpired:
                return True  # the deadline passed
            return False

        try:
            timed_out, reason = False, 'isolate=False'
            if isolate is not False and not sys.platform.startswith('linux'):
                reason = f'{sys.platform} không có network namespace của Linux'
            elif isolate is not False and shutil.which(UNSHARE[0]) is None:
                reason = f'không tìm thấy lệnh `{UNSHARE[0]}`'
            elif isolate is not False:
                timed_out = watch(UNSHARE, os.readlink('/proc/self/ns/net'), None)
                reason = None if timed_out or (out / 'net-ready').exists() else 'refused'
                if reason:
                    last = _tail(out / 'launcher.log', 1)
                    reason = 'không tạo được network namespace riêng' + (': ' * bool(last)) + last
                    _stop(launcher)
            if reason and isolate:
                raise NetworkIsolationError(
                    f'không chạy được các worker trong mạng riêng: {reason}; '
                    '`isolate=None` sẽ chạy chúng trên mạng của máy (kèm cảnh báo)',
                    pids=[], exit_codes=[], stderr=[], launcher_pid=launcher and launcher.pid,
                )  # fmt: skip
            if reason:
                hosts = _hosts(n_workers)
                ports = ', '.join(h.rsplit(':', 1)[1] for h in hosts)
                warning = WARNING.format(
                    reason=reason, deadline_s=deadline_s, n=n_workers, ports=ports
                )
                print(warning, file=sys.stderr, flush=True)
                timed_out = watch([], None, hosts)
            elapsed = time.monotonic() - start
        finally:  # normal end, error, KeyboardInterrupt: nothing is left behind
            if launcher is not None:
                _stop(launcher)

        network, cls, message = 'shared' if reason else 'isolated', WorkerError, None
        launch, status = _json(out / 'launch.json') or {}, _json(out / 'status.json')
        pids = launch.get('pids', [])
        codes = status['codes'] if status else [None] * len(pids)
        if timed_out:
            killed = status['killed'] if status else list(range(len(pids)))
            cls, message = (
                WorkerTimeout,
                f'quá hạn {deadline_s:g} s: đã dừng (SIGKILL) worker {killed}',
            )
        elif status is None:
            message = f'bộ khởi động worker thoát với mã {launcher.returncode}: '
            message += _tail(out / 'launcher.log', 1)
        elif (i := status['failed']) is not None:
            message = f'worker {i} thoát với mã {codes[i]}; đã dừng (SIGKILL) mọi worker còn lại'
        elif len(codes) != n_workers or any(codes):
            message = 'bộ khởi động worker bị dừng trước khi các worker xong'
        if message:
            tails = [_tail(out / f'worker{i}.stderr') for i in range(len(pids))]
            for i, (c, t) in enumerate(zip(codes, tails, strict=True)):
                message += f'\n  worker {i}: mã thoát {c}' + (
                    t and ', stderr: ' + t.splitlines()[-1]
                )
            kw = dict(pids=pids, exit_codes=codes, stderr=tails, launcher_pid=launcher.pid)
            raise cls(message, network=network, **kw)
        import numpy as np

        weights, losses = [], []
        for i in range(n_workers):
            with np.load(out / f'worker{i}.npz') as data:
                weights.append([data[f'w{j}'] for j in range(len(data.files) - 1)])
                losses.append([float(v) for v in data['losses']])
        note = SHARED_NOTE.format(reason=reason) if reason else ISOLATED_NOTE
        hosts = launch['hosts']
        return WorkerResult(
            weights, losses, codes, pids, hosts, elapsed, network, note, launcher.pid
        )


if __name__ == '__main__':
    sys.exit(_launch(Path(sys.argv[1]), json.loads(sys.argv[2])))
