"""``run_workers(script)``: a notebook's training loop under ``MultiWorkerMirroredStrategy`` run
as ``n_workers`` processes on this machine, each with a ``TF_CONFIG`` naming 127.0.0.1 ports.

TensorFlow's gRPC server listens on ``0.0.0.0:PORT`` whatever ``TF_CONFIG`` says, without
authentication: whoever reaches the port runs ops in the worker. So the workers run in a private
user + network namespace (``unshare --map-root-user --net``) whose only interface is its own
loopback; where the OS refuses, on the machine's network, after one warning line on stderr naming
the open ports (``isolate=True`` raises ``NetworkIsolationError`` instead). A launcher
(``_launcher.py``) starts them and kills them all when one fails or when ``run_workers`` says stop:
at ``deadline_s``, on any exception or KeyboardInterrupt, or when the caller dies.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ._launcher import free_hosts

LAUNCHER = Path(__file__).with_name('_launcher.py')
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
STOP_GRACE_S = 10.0  # how long the launcher gets to kill and reap its workers once told to stop


class WorkerError(RuntimeError):
    """A worker failed (or the deadline passed); every worker has been killed and reaped."""

    def __init__(self, message, *, pids=(), exit_codes=(), network=None, launcher_pid=None):
        super().__init__(message)
        self.pids = list(pids)
        self.exit_codes = list(exit_codes)
        self.network = network
        self.launcher_pid = launcher_pid


class WorkerTimeout(WorkerError):
    """The deadline passed before every worker had finished."""


class NetworkIsolationError(WorkerError):
    """``isolate=True``, but the OS refused the private network namespace; no worker started."""


@dataclass(frozen=True)
class WorkerResult:
    weights: list[list]  # weights[i]: the weights worker i wrote (NumPy arrays)
    losses: list[list[float]]  # losses[i][step]: the loss worker i wrote for each step
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


def _tail(path: Path) -> str:
    try:
        return '\n'.join(path.read_text(errors='replace').strip().splitlines()[-1:])
    except OSError:
        return ''


def _read_json(path: Path) -> dict | None:
    return json.loads(path.read_text(encoding='utf-8')) if path.exists() else None


def _start(folder: Path, cmds: list, env: dict, prefix: list, caller_ns, hosts) -> subprocess.Popen:
    """The launcher, in its own session, its stdin a pipe that only this process holds."""
    spec = json.dumps({'cmds': cmds, 'caller_ns': caller_ns, 'hosts': hosts})
    with open(folder / 'launcher.log', 'w') as log:
        return subprocess.Popen(
            [*prefix, sys.executable, str(LAUNCHER), str(folder), spec],
            env=env,
            stdin=subprocess.PIPE,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )


def _stop(launcher: subprocess.Popen) -> None:
    """Tell the launcher to stop (a byte, then the end of its stdin) and reap it, or SIGKILL its
    whole session."""
    try:
        launcher.stdin.write(b'.')
        launcher.stdin.close()
        launcher.wait(STOP_GRACE_S)
    except (subprocess.TimeoutExpired, BrokenPipeError):  # BrokenPipeError: it had ended
        pass
    finally:
        if launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGKILL)
            launcher.wait()


def _why_not_isolated(isolate: bool | None) -> str | None:
    """Why the workers will not run in a private network namespace (None: they will). Unless
    ``isolate=False``, the launcher's probe is run once under ``unshare``."""
    if isolate is False:
        return 'isolate=False'
    if shutil.which(UNSHARE[0]) is None:
        return f'không tìm thấy lệnh `{UNSHARE[0]}`'
    caller_ns = os.readlink('/proc/self/ns/net')
    probe = [*UNSHARE, sys.executable, str(LAUNCHER), '--probe', caller_ns]
    done = subprocess.run(probe, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if done.returncode == 0:
        return None
    reason = done.stderr.strip().splitlines()
    return 'không tạo được network namespace riêng' + (': ' + reason[-1] if reason else '')


def _run(folder: Path, cmds: list, env: dict, why: str | None, deadline_s: float):
    """Run the workers through a launcher, in a private network namespace unless ``why`` says
    why not (then on the machine's network, after a warning), until they end or ``deadline_s``
    passes. Returns (launcher, timed out) once the launcher has been stopped."""
    if why is None:
        launcher = _start(folder, cmds, env, UNSHARE, os.readlink('/proc/self/ns/net'), None)
    else:
        hosts = free_hosts(len(cmds))
        ports = ', '.join(h.rsplit(':', 1)[1] for h in hosts)
        warning = WARNING.format(reason=why, deadline_s=deadline_s, n=len(cmds), ports=ports)
        print(warning, file=sys.stderr, flush=True)
        launcher = _start(folder, cmds, env, [], None, hosts)
    try:  # Popen.wait(timeout) polls: a KeyboardInterrupt gets through
        launcher.wait(deadline_s)
        return launcher, False
    except subprocess.TimeoutExpired:
        return launcher, True
    finally:  # normal end, error, KeyboardInterrupt: nothing is left behind
        _stop(launcher)


def _failure(folder: Path, n: int, launcher: subprocess.Popen, timed_out: bool, deadline_s):
    """What went wrong in a run whose launcher has ended, as (error class, message), or None."""
    status = _read_json(folder / 'status.json')
    if timed_out:
        killed = f'worker {status["killed"]}' if status else 'mọi worker'
        return WorkerTimeout, f'quá hạn {deadline_s:g} s: đã dừng (SIGKILL) {killed}'
    if status is None:
        log = _tail(folder / 'launcher.log')
        return WorkerError, f'bộ khởi động worker thoát với mã {launcher.returncode}: {log}'
    if status['failed'] is not None:
        i = status['failed']
        message = f'worker {i} thoát với mã {status["codes"][i]}'
        return WorkerError, message + '; đã dừng (SIGKILL) mọi worker còn lại'
    if len(status['codes']) != n or any(status['codes']):
        return WorkerError, 'bộ khởi động worker bị dừng trước khi các worker xong'
    missing = [i for i in range(n) if not (folder / f'worker{i}.json').exists()]
    if missing:
        return WorkerError, f'worker {missing} thoát với mã 0 nhưng không ghi worker<i>.json'
    return None


def run_workers(
    script: str | os.PathLike,
    n_workers: int = 2,
    *,
    args: Sequence = (),
    deadline_s: float = 120.0,
    isolate: bool | None = None,
) -> WorkerResult:
    """Run ``python script *args`` as ``n_workers`` workers in one temporary working folder, each
    with the ``TF_CONFIG`` of its index; each must write ``worker<index>.json`` there:
    ``{"weights": [...], "losses": [...]}`` (lists of numbers). ``deadline_s`` bounds the run
    (``WorkerTimeout``). The workers see no GPU: on one GPU, each TensorFlow process would claim
    most of its memory. ``isolate``: None (private network, else shared with a warning), True
    (private or ``NetworkIsolationError``), False."""
    from .checks import check_int, check_number

    script = Path(script).resolve()
    if not script.is_file():
        raise FileNotFoundError(f'không có chương trình worker {str(script)!r}')
    n_workers = check_int('n_workers', n_workers, 1)
    deadline_s = check_number('deadline_s', deadline_s, minimum=0, strict=True)
    if not (isolate is None or isinstance(isolate, bool)):
        raise TypeError(f'tham số `isolate` phải là None, True hoặc False, nhận được {isolate!r}')
    if isinstance(args, (str, bytes)):
        raise TypeError(f'tham số `args` phải là một dãy tham số, nhận được {args!r}')
    cmds = [[sys.executable, str(script), *map(str, args)]] * n_workers
    env = {**os.environ, 'TF_CPP_MIN_LOG_LEVEL': '2', 'TF_ENABLE_ONEDNN_OPTS': '0'}
    env['CUDA_VISIBLE_DEVICES'] = ''
    why = _why_not_isolated(isolate)
    if why is not None and isolate:
        raise NetworkIsolationError(
            f'không chạy được các worker trong mạng riêng: {why}; '
            '`isolate=None` sẽ chạy chúng trên mạng của máy (kèm cảnh báo)'
        )
    network = 'shared' if why else 'isolated'
    with tempfile.TemporaryDirectory(prefix='d2l-multiworker-') as tmp:
        folder = Path(tmp)
        start = time.monotonic()
        launcher, timed_out = _run(folder, cmds, env, why, deadline_s)
        elapsed = time.monotonic() - start
        launched = _read_json(folder / 'launch.json') or {'pids': [], 'hosts': []}
        pids = launched['pids']
        codes = (_read_json(folder / 'status.json') or {}).get('codes', [None] * len(pids))
        failure = _failure(folder, n_workers, launcher, timed_out, deadline_s)
        if failure:
            error, message = failure
            for i, code in enumerate(codes):
                log = _tail(folder / f'worker{i}.log')
                message += f'\n  worker {i}: mã thoát {code}'
                message += log and ', log: ' + log
            kw = dict(pids=pids, exit_codes=codes, launcher_pid=launcher.pid)
            raise error(message, network=network, **kw)
        import numpy as np

        outputs = [_read_json(folder / f'worker{i}.json') for i in range(n_workers)]
        weights = [[np.asarray(w) for w in out['weights']] for out in outputs]
        losses = [[float(v) for v in out['losses']] for out in outputs]
        note = SHARED_NOTE.format(reason=why) if why else ISOLATED_NOTE
        return WorkerResult(
            weights, losses, codes, pids, launched['hosts'], elapsed, network, note, launcher.pid
        )
