"""Multi-worker training on one machine: start the workers, keep them off the network, clean up.

Taught in ``notebooks/data-parallel.ipynb`` (section "Nhiều worker").

``run_workers(n_workers=2, steps=5)`` starts ``n_workers`` Python processes, each running
``multiworker_worker.py`` (a custom training loop under
``tf.distribute.MultiWorkerMirroredStrategy``) with its own ``TF_CONFIG`` naming
``127.0.0.1:PORT`` addresses, waits for all of them and returns a ``WorkerResult`` with every
worker's final weights and per-step losses.

**The network.** TensorFlow's gRPC server ignores the host part of its address: it listens on
``0.0.0.0:PORT``, i.e. on every interface of the machine, and it has no authentication (whoever
reaches the port can run graph ops in that process). So, by default (``isolate=None``), the
workers run in a private network namespace (Linux: ``unshare --map-root-user --net``, a user +
network namespace that needs no privilege where the kernel allows unprivileged user namespaces)
whose only interface is a loopback of their own: they reach each other on 127.0.0.1, nobody else
can reach them, not even other processes of this machine (``WorkerResult.network == 'isolated'``).
Where the OS refuses (no user namespaces, a container without the capability, macOS, no
``unshare`` command), ``run_workers`` falls back to the shared network
(``WorkerResult.network == 'shared'``) and prints one warning line on stderr, before the workers
start, saying what listens, on which ports and for how long at most::

    CẢNH BÁO: mạng không được cô lập (REASON). Trong tối đa 120 s, 2 worker TensorFlow lắng nghe
    trên mọi địa chỉ mạng của máy này (0.0.0.0, cổng 45003, 49907), không có xác thực: ai kết nối
    được tới máy này có thể chạy lệnh trong các tiến trình đó.

(one line; its ports change from run to run, so a notebook whose stored output must match should
not show it: it appears only in the shared mode). ``isolate=True`` raises
``NetworkIsolationError`` instead of falling back; ``isolate=False`` forces the shared network
(and prints the warning too).

**Processes.** ``run_workers`` starts one launcher (``multiworker_launch.py``, in a session of its
own, inside the namespace when isolated) which starts the workers and watches them. A worker
whose peer never comes waits for it forever, and it ignores SIGTERM. So the launcher kills every
worker with SIGKILL, then reaps them,

* as soon as any worker exits with an error (its peers would wait forever),
* when ``run_workers`` closes the launcher's stdin: at ``deadline_s`` (``WorkerTimeout``), on any
  exception, on ``KeyboardInterrupt``; the OS closes it too if the calling process dies,

and ``run_workers`` waits for the launcher (SIGKILL to its whole session if it does not end within
``_STOP_GRACE_S`` seconds). No process outlives the call. Failures raise ``WorkerError``
(``WorkerTimeout`` and ``NetworkIsolationError`` are ones) carrying the pids, exit codes and the
end of each worker's stderr.

Public API: ``run_workers``, ``WorkerResult``, ``WorkerError``, ``WorkerTimeout``,
``NetworkIsolationError``, ``free_ports``, ``tf_config``. This module does not import TensorFlow:
the workers do.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .checks import check_int, check_seconds
from .kernel import QUIET_ENV
from .multiworker_launch import _write_json, free_ports, tf_config

__all__ = [
    'run_workers',
    'WorkerResult',
    'WorkerError',
    'WorkerTimeout',
    'NetworkIsolationError',
    'free_ports',
    'tf_config',
]

WORKER_SCRIPT = Path(__file__).with_name('multiworker_worker.py')
LAUNCH_SCRIPT = Path(__file__).with_name('multiworker_launch.py')
# A new user namespace (we are "root" in it, with no privilege outside) and a new network
# namespace owned by it; unshare then execs the launcher, which keeps unshare's pid.
UNSHARE = ['unshare', '--map-root-user', '--net']
_POLL_S = 0.05
_STOP_GRACE_S = 10.0  # how long the launcher may take to kill and reap its workers once asked

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


def _pause() -> None:
    """Wait a little between two looks at the launcher (a test replaces it)."""
    time.sleep(_POLL_S)


def _on_started(pids: list[int]) -> None:
    """Called once, as soon as every worker has started (a test replaces it)."""


class WorkerError(RuntimeError):
    """A worker failed (or the deadline passed); every worker has been killed and reaped."""

    def __init__(
        self,
        message: str,
        *,
        pids: list[int],
        exit_codes: list[int | None],
        stderr: list[str],
        network: str | None = None,
        launcher_pid: int | None = None,
    ) -> None:
        super().__init__(message)
        self.pids, self.exit_codes, self.stderr = pids, exit_codes, stderr
        self.network, self.launcher_pid = network, launcher_pid


class WorkerTimeout(WorkerError):
    """The deadline passed before every worker had finished."""


class NetworkIsolationError(WorkerError):
    """``isolate=True``, but the OS refused the private network namespace; no worker started."""


@dataclass(frozen=True)
class WorkerResult:
    """What ``run_workers`` returns: per worker, its final weights and its losses, step by step."""

    weights: list[list[np.ndarray]]  # weights[i]: worker i's model.get_weights()
    losses: list[list[float]]  # losses[i][step]: the global loss each worker saw
    exit_codes: list[int]
    pids: list[int]
    hosts: list[str]  # the cluster, as in TF_CONFIG
    elapsed_s: float  # wall time from the first start to the last exit
    network: str  # 'isolated' (private network namespace) or 'shared' (the machine's network)
    network_note: str  # the same in words, in Vietnamese; in 'shared' mode also why
    launcher_pid: int  # the launcher process (its session held the workers)

    @property
    def max_abs_diff(self) -> float:
        """Largest |w_i - w_0| over all workers i and all weights (0.0: identical)."""
        return max(
            (
                float(np.max(np.abs(a - b)))
                for ws in self.weights[1:]
                for a, b in zip(ws, self.weights[0], strict=True)
            ),
            default=0.0,
        )

    @property
    def equal(self) -> bool:
        """True if every worker ended with bit-for-bit the same weights as worker 0."""
        return all(
            len(ws) == len(self.weights[0])
            and all(np.array_equal(a, b) for a, b in zip(ws, self.weights[0], strict=True))
            for ws in self.weights[1:]
        )

    def __str__(self) -> str:
        # No pid, no port: a notebook's stored output of print(result) must stay the same.
        return (
            f'{len(self.weights)} worker: mã thoát {self.exit_codes}, '
            f'trọng số giống hệt nhau: {self.equal}, max |w_i - w_0| = {self.max_abs_diff:.1e}, '
            f'{self.elapsed_s:.1f} s; mạng: {self.network_note}'
        )

    def _repr_pretty_(self, p, cycle) -> None:
        p.text(str(self))


def _isolation_obstacle() -> str | None:
    """Why a private network namespace cannot even be tried here (None: try it)."""
    if not sys.platform.startswith('linux'):
        return f'{sys.platform} không có network namespace của Linux'
    if shutil.which(UNSHARE[0]) is None:
        return f'không tìm thấy lệnh `{UNSHARE[0]}`'
    return None


def _refusal(text: str) -> str:
    """The reason recorded when the namespace was refused; ``text``: the refusal's last line."""
    return 'không tạo được network namespace riêng' + (f': {text}' if text else '')


def _probe_isolation(python: str = sys.executable) -> str | None:
    """Try a private network namespace with a working loopback; None if it works, else why not."""
    reason = _isolation_obstacle()
    if reason is not None:
        return reason
    try:
        done = subprocess.run(
            [*UNSHARE, python, str(LAUNCH_SCRIPT), '--probe'],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return _refusal(str(err))
    if done.returncode == 0:
        return None
    return _refusal((done.stderr.strip().splitlines() or [f'mã thoát {done.returncode}'])[-1])


def _tail(path: Path, lines: int = 3) -> str:
    try:
        text = path.read_text(errors='replace').strip().splitlines()
    except OSError:
        return ''
    return '\n'.join(text[-lines:])


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text(encoding='utf-8'))
    except FileNotFoundError:
        return None


def _start(cmd: list[str], env: Mapping[str, str], log: Path) -> subprocess.Popen:
    """Start a launcher in a session of its own, its stdin a pipe that only we hold."""
    with open(log, 'w') as log_file:
        return subprocess.Popen(
            cmd,
            env=dict(env),
            stdin=subprocess.PIPE,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _stop(proc: subprocess.Popen) -> None:
    """Ask the launcher to kill and reap its workers (end of file on its stdin) and reap it.

    If it has not ended within ``_STOP_GRACE_S`` seconds, or a second KeyboardInterrupt cuts the
    wait short, SIGKILL its whole session (the workers are in it), then reap it.
    """
    try:
        if proc.stdin is not None and not proc.stdin.closed:
            proc.stdin.close()
        proc.wait(_STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        pass
    finally:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                proc.kill()
            proc.wait()


def _watch(proc: subprocess.Popen, out: Path, start: float, deadline_s: float) -> bool:
    """Wait for the launcher to end; True if the deadline passed first (then it is stopped)."""
    announced = False
    while proc.poll() is None:
        if not announced and (out / 'launch.json').exists():
            announced = True
            _on_started(_read_json(out / 'launch.json')['pids'])
        if time.monotonic() - start > deadline_s:
            _stop(proc)
            return True
        _pause()
    return False


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
    python: str = sys.executable,
) -> WorkerResult:
    """Train one small model with ``n_workers`` processes on 127.0.0.1 and return their results.

    Each worker gets the same seed and data, reads its shard of every global batch of
    ``global_batch`` examples, and applies the gradients all-reduced over the workers, so all
    end with the same weights. ``deadline_s`` (finite, > 0) bounds the whole run: after it, every
    worker still alive is killed and ``WorkerTimeout`` is raised. ``cpu_only`` hides GPUs from
    the workers (the notebook's own kernel already holds the GPU memory). ``worker_args`` adds
    command-line arguments for some workers, e.g. ``{1: ['--delay-start', '60']}`` to simulate a
    late machine. ``python`` runs the launcher and the workers.

    ``isolate``: ``None`` (default) runs the workers in a private network namespace if the OS
    allows it, else on the machine's network with a warning on stderr (see the module's
    docstring; the warning names the ports, so it is not meant for a stored notebook output);
    ``True``: private namespace or ``NetworkIsolationError``; ``False``: the machine's network,
    with the warning. ``WorkerResult.network`` says which mode ran.
    """
    n_workers = check_int('n_workers', n_workers, 1)
    steps = check_int('steps', steps, 1)
    global_batch = check_int('global_batch', global_batch, 1)
    if global_batch % n_workers:
        raise ValueError(
            f'tham số `global_batch` ({global_batch}) phải chia hết cho `n_workers` ({n_workers})'
        )
    seed = check_int('seed', seed, 0)
    deadline_s = check_seconds('deadline_s', deadline_s)
    if not (isolate is None or isinstance(isolate, bool)):
        raise TypeError(f'tham số `isolate` phải là None, True hoặc False, nhận được {isolate!r}')
    worker_args = dict(worker_args or {})
    for i, args in worker_args.items():
        if not (isinstance(i, int) and not isinstance(i, bool) and 0 <= i < n_workers):
            raise ValueError(
                f'khoá của tham số `worker_args` phải là chỉ số worker trong [0, {n_workers}), '
                f'nhận được {i!r}'
            )
        if isinstance(args, (str, bytes)) or not isinstance(args, Sequence):
            raise TypeError(
                f'tham số `worker_args[{i}]` phải là danh sách tham số dòng lệnh, '
                f'nhận được {args!r}'
            )
    exe = shutil.which(python)
    if exe is None:
        raise FileNotFoundError(errno.ENOENT, 'không tìm thấy trình thông dịch Python', python)

    env = {**os.environ, **QUIET_ENV}
    if cpu_only:
        env['CUDA_VISIBLE_DEVICES'] = ''
    launcher: subprocess.Popen | None = None
    with tempfile.TemporaryDirectory(prefix='d2l-multiworker-') as tmp:
        out = Path(tmp)
        cmds = [
            [
                exe,
                str(WORKER_SCRIPT),
                '--out',
                tmp,
                '--steps',
                str(steps),
                '--global-batch',
                str(global_batch),
                '--seed',
                str(seed),
                *map(str, worker_args.get(i, [])),
            ]
            for i in range(n_workers)
        ]
        start = time.monotonic()
        try:
            timed_out = False
            reason = 'isolate=False' if isolate is False else _isolation_obstacle()
            network = 'isolated' if reason is None else 'shared'
            if network == 'isolated':
                _write_json(out / 'spec.json', {'cmds': cmds, 'hosts': None, 'setup_net': True})
                launcher = _start(
                    [*UNSHARE, exe, str(LAUNCH_SCRIPT), tmp], env, out / 'launcher.log'
                )
                timed_out = _watch(launcher, out, start, deadline_s)
                if not timed_out and not (out / 'net-ready').exists():
                    reason = _refusal(_tail(out / 'launcher.log', 1))
                    network = 'shared'
            if network == 'shared' and isolate is True:
                raise NetworkIsolationError(
                    f'không chạy được các worker trong mạng riêng: {reason}; '
                    '`isolate=None` sẽ chạy chúng trên mạng của máy (kèm cảnh báo)',
                    pids=[],
                    exit_codes=[],
                    stderr=[],
                    launcher_pid=launcher.pid if launcher else None,
                )
            if network == 'shared':
                hosts = [f'127.0.0.1:{p}' for p in free_ports(n_workers)]
                ports = ', '.join(h.rsplit(':', 1)[1] for h in hosts)
                print(
                    WARNING.format(reason=reason, deadline_s=deadline_s, n=n_workers, ports=ports),
                    file=sys.stderr,
                    flush=True,
                )
                _write_json(out / 'spec.json', {'cmds': cmds, 'hosts': hosts, 'setup_net': False})
                launcher = _start([exe, str(LAUNCH_SCRIPT), tmp], env, out / 'launcher-shared.log')
                timed_out = _watch(launcher, out, start, deadline_s)
            elapsed = time.monotonic() - start
        finally:  # normal end, error, KeyboardInterrupt: nothing is left behind
            if launcher is not None:
                _stop(launcher)

        launch = _read_json(out / 'launch.json') or {}
        status = _read_json(out / 'status.json')
        pids: list[int] = launch.get('pids', [])
        codes: list[int | None] = status['exit_codes'] if status else [None] * len(pids)
        note = ISOLATED_NOTE if network == 'isolated' else SHARED_NOTE.format(reason=reason)

        def error(cls: type[WorkerError], message: str) -> WorkerError:
            tails = [_tail(out / f'worker{i}.stderr') for i in range(len(pids))]
            details = ''.join(
                f'\n  worker {i}: mã thoát {c}' + (f', stderr: {t.splitlines()[-1]}' if t else '')
                for i, (c, t) in enumerate(zip(codes, tails, strict=True))
            )
            return cls(
                message + details,
                pids=pids,
                exit_codes=codes,
                stderr=tails,
                network=network,
                launcher_pid=launcher.pid,
            )

        if timed_out:
            killed = status['killed'] if status else list(range(len(pids)))
            raise error(
                WorkerTimeout, f'quá hạn {deadline_s:g} s: đã dừng (SIGKILL) worker {killed}'
            )
        if status is None:
            log = out / ('launcher.log' if network == 'isolated' else 'launcher-shared.log')
            raise error(
                WorkerError,
                f'bộ khởi động worker thoát với mã {launcher.returncode}: {_tail(log, 1)}',
            )
        if status['failed'] is not None:
            i = status['failed']
            raise error(
                WorkerError,
                f'worker {i} thoát với mã {codes[i]}; đã dừng (SIGKILL) mọi worker còn lại',
            )
        if status['stopped'] or len(codes) != n_workers or any(c != 0 for c in codes):
            raise error(WorkerError, 'bộ khởi động worker bị dừng trước khi các worker xong')
        weights, losses = [], []
        for i in range(n_workers):
            path = out / f'worker{i}.npz'
            if not path.exists():
                raise error(WorkerError, f'worker {i} thoát với mã 0 nhưng không ghi {path.name}')
            with np.load(path) as data:
                n_w = sum(1 for k in data.files if k.startswith('w'))
                weights.append([data[f'w{j}'] for j in range(n_w)])
                losses.append([float(v) for v in data['losses']])
        return WorkerResult(
            weights=weights,
            losses=losses,
            exit_codes=codes,
            pids=pids,
            hosts=launch['hosts'],
            elapsed_s=elapsed,
            network=network,
            network_note=note,
            launcher_pid=launcher.pid,
        )
