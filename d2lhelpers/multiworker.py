"""Multi-worker training on one machine: start the workers, bound them by a deadline, clean up.

Taught in ``notebooks/data-parallel.ipynb`` (section "Nhiều worker").

``run_workers(n_workers=2, steps=5)`` starts ``n_workers`` Python processes on 127.0.0.1, each
running ``multiworker_worker.py`` (a custom training loop under
``tf.distribute.MultiWorkerMirroredStrategy``) with its own ``TF_CONFIG``, waits for all of them and
returns a ``WorkerResult`` with every worker's final weights and per-step losses.

A worker whose peer never comes waits for it forever, and it ignores SIGTERM. So every worker
runs in a session of its own, and ``run_workers`` kills the whole session with SIGKILL

* as soon as any worker exits with an error (its peers would wait forever),
* when ``deadline_s`` seconds have passed (``WorkerTimeout``),
* and in any case on the way out, also on ``KeyboardInterrupt``,

then reaps every process it started. No process outlives the call. Failures raise
``WorkerError`` (``WorkerTimeout`` is one) carrying the pids, exit codes and the end of each
worker's stderr.

Public API: ``run_workers``, ``WorkerResult``, ``WorkerError``, ``WorkerTimeout``, ``free_ports``,
``tf_config``. This module does not import TensorFlow: the workers do.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .checks import check_int
from .kernel import QUIET_ENV

__all__ = ['run_workers', 'WorkerResult', 'WorkerError', 'WorkerTimeout', 'free_ports', 'tf_config']

WORKER_SCRIPT = Path(__file__).with_name('multiworker_worker.py')
_POLL_S = 0.05


def _pause() -> None:
    """Wait a little between two looks at the workers (a test replaces it)."""
    time.sleep(_POLL_S)


class WorkerError(RuntimeError):
    """A worker failed (or the deadline passed); every worker has been killed and reaped."""

    def __init__(
        self, message: str, *, pids: list[int], exit_codes: list[int | None], stderr: list[str]
    ) -> None:
        super().__init__(message)
        self.pids, self.exit_codes, self.stderr = pids, exit_codes, stderr


class WorkerTimeout(WorkerError):
    """The deadline passed before every worker had finished."""


@dataclass(frozen=True)
class WorkerResult:
    """What ``run_workers`` returns: per worker, its final weights and its losses, step by step."""

    weights: list[list[np.ndarray]]  # weights[i]: worker i's model.get_weights()
    losses: list[list[float]]  # losses[i][step]: the global loss each worker saw
    exit_codes: list[int]
    pids: list[int]
    hosts: list[str]  # the cluster, as in TF_CONFIG
    elapsed_s: float  # wall time from the first start to the last exit

    @property
    def max_abs_diff(self) -> float:
        """Largest |w_i - w_0| over all workers i and all weights (0.0: identical)."""
        return max(
            (
                float(np.max(np.abs(a - b)))
                for ws in self.weights[1:]
                for a, b in zip(ws, self.weights[0])
            ),
            default=0.0,
        )

    @property
    def equal(self) -> bool:
        """True if every worker ended with bit-for-bit the same weights as worker 0."""
        return all(
            len(ws) == len(self.weights[0])
            and all(np.array_equal(a, b) for a, b in zip(ws, self.weights[0]))
            for ws in self.weights[1:]
        )

    def __str__(self) -> str:
        return (
            f'{len(self.weights)} worker: mã thoát {self.exit_codes}, '
            f'trọng số giống hệt nhau: {self.equal}, max |w_i - w_0| = {self.max_abs_diff:.1e}, '
            f'{self.elapsed_s:.1f} s'
        )

    def _repr_pretty_(self, p, cycle) -> None:
        p.text(str(self))


def free_ports(n: int, host: str = '127.0.0.1') -> list[int]:
    """``n`` distinct TCP ports that are free on ``host`` right now (the OS picks them: port 0).

    All ``n`` sockets are open at once, so the ports differ. Another program could still take one
    before the worker binds it; that race is rare on a single machine and ends in a clear
    ``WorkerError``.
    """
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((host, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def tf_config(hosts: Sequence[str], index: int) -> dict:
    """The ``TF_CONFIG`` of worker ``index`` in a cluster of ``hosts`` (``"host:port"`` each)."""
    if not 0 <= index < len(hosts):
        raise ValueError(f'`index` must be in [0, {len(hosts)}), got {index}')
    return {'cluster': {'worker': list(hosts)}, 'task': {'type': 'worker', 'index': index}}


def _kill(proc: subprocess.Popen) -> None:
    """SIGKILL the worker's whole session (it is its leader), then reap it."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            try:
                proc.kill()
            except ProcessLookupError:
                pass
    proc.wait()


def _tail(path: Path, lines: int = 3) -> str:
    try:
        text = path.read_text(errors='replace').strip().splitlines()
    except OSError:
        return ''
    return '\n'.join(text[-lines:])


def run_workers(
    n_workers: int = 2,
    *,
    steps: int = 5,
    global_batch: int = 64,
    seed: int = 0,
    deadline_s: float = 120.0,
    cpu_only: bool = True,
    worker_args: Mapping[int, Sequence[str]] | None = None,
    python: str = sys.executable,
) -> WorkerResult:
    """Train one small model with ``n_workers`` processes on 127.0.0.1 and return their results.

    Each worker gets the same seed and data, reads its shard of every global batch of
    ``global_batch`` examples, and applies the gradients all-reduced over the workers, so all
    end with the same weights. ``deadline_s`` bounds the whole run: after it, every worker still
    alive is killed and ``WorkerTimeout`` is raised. ``cpu_only`` hides GPUs from the workers (the
    notebook's own kernel already holds the GPU memory). ``worker_args`` adds command-line
    arguments for some workers, e.g. ``{1: ['--delay-start', '60']}`` to simulate a late machine.
    """
    n_workers = check_int('n_workers', n_workers, 1)
    steps = check_int('steps', steps, 1)
    global_batch = check_int('global_batch', global_batch, 1)
    if global_batch % n_workers:
        raise ValueError(
            f'`global_batch` ({global_batch}) must be divisible by `n_workers` ({n_workers})'
        )
    if isinstance(deadline_s, bool) or not isinstance(deadline_s, (int, float)) or deadline_s <= 0:
        raise ValueError(f'`deadline_s` must be a positive number of seconds, got {deadline_s!r}')
    worker_args = dict(worker_args or {})
    if any(not (isinstance(i, int) and 0 <= i < n_workers) for i in worker_args):
        raise ValueError(f'`worker_args` keys must be worker indices in [0, {n_workers})')

    hosts = [f'127.0.0.1:{p}' for p in free_ports(n_workers)]
    procs: list[subprocess.Popen] = []
    with tempfile.TemporaryDirectory(prefix='d2l-multiworker-') as tmp:
        out = Path(tmp)
        errs = [out / f'worker{i}.stderr' for i in range(n_workers)]

        def error(cls: type[WorkerError], message: str) -> WorkerError:
            for p in procs:  # kill and reap first: the exit codes below are final
                _kill(p)
            codes = [p.returncode for p in procs]
            tails = [_tail(e) for e in errs[: len(procs)]]
            details = ''.join(
                f'\n  worker {i}: mã thoát {c}' + (f', stderr: {t.splitlines()[-1]}' if t else '')
                for i, (p, c, t) in enumerate(zip(procs, codes, tails))
            )
            return cls(
                message + details, pids=[p.pid for p in procs], exit_codes=codes, stderr=tails
            )

        start = time.monotonic()
        try:
            for i in range(n_workers):
                env = {**os.environ, **QUIET_ENV, 'TF_CONFIG': json.dumps(tf_config(hosts, i))}
                if cpu_only:
                    env['CUDA_VISIBLE_DEVICES'] = ''
                cmd = [
                    python,
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
                with open(errs[i], 'w') as err_file:
                    procs.append(
                        subprocess.Popen(
                            cmd,
                            env=env,
                            stdin=subprocess.DEVNULL,
                            stdout=err_file,
                            stderr=subprocess.STDOUT,
                            start_new_session=True,
                        )
                    )
            while True:
                codes = [p.poll() for p in procs]
                failed = [i for i, c in enumerate(codes) if c not in (None, 0)]
                if failed:
                    raise error(
                        WorkerError,
                        f'worker {failed[0]} thoát với mã {codes[failed[0]]}; '
                        'đã dừng (SIGKILL) mọi worker còn lại',
                    )
                if all(c == 0 for c in codes):
                    break
                if time.monotonic() - start > deadline_s:
                    alive = [i for i, c in enumerate(codes) if c is None]
                    raise error(
                        WorkerTimeout, f'quá hạn {deadline_s:g} s: đã dừng (SIGKILL) worker {alive}'
                    )
                _pause()
            elapsed = time.monotonic() - start
            weights, losses = [], []
            for i in range(n_workers):
                path = out / f'worker{i}.npz'
                if not path.exists():
                    raise error(
                        WorkerError, f'worker {i} thoát với mã 0 nhưng không ghi {path.name}'
                    )
                with np.load(path) as data:
                    n_w = sum(1 for k in data.files if k.startswith('w'))
                    weights.append([data[f'w{j}'] for j in range(n_w)])
                    losses.append([float(v) for v in data['losses']])
            return WorkerResult(
                weights=weights,
                losses=losses,
                exit_codes=[p.returncode for p in procs],
                pids=[p.pid for p in procs],
                hosts=hosts,
                elapsed_s=elapsed,
            )
        finally:
            for p in procs:  # normal end, error, KeyboardInterrupt: nothing is left behind
                _kill(p)
