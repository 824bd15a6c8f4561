"""The launcher of ``run_workers``: starts the workers, watches them, kills them all, reports.

``d2lhelpers.multiworker.run_workers`` starts ONE launcher process per run, in a session of its
own; the launcher starts the ``n`` worker processes (they stay in its session) and waits for them.
In isolated mode the launcher runs under ``unshare --map-root-user --net``: it and its workers
share a new, private network namespace whose only interface is the loopback, which the launcher
brings up before anything else. TensorFlow's gRPC server listens on ``0.0.0.0:PORT`` whatever
``TF_CONFIG`` says; inside that namespace ``0.0.0.0`` means this private loopback only, so nothing
outside the namespace (another machine, or another process of this machine) can connect.

Run as a script, with the standard library only (no numpy, no ``d2lhelpers`` package import)::

    python multiworker_launch.py DIR       # run the workers that DIR/spec.json describes
    python multiworker_launch.py --probe   # only set up and test the private loopback, exit 0

``DIR/spec.json`` (written by ``run_workers``)::

    {"cmds": [[argv of worker 0], ...], "hosts": ["127.0.0.1:PORT", ...] or null,
     "setup_net": true or false}

``hosts`` null: the launcher picks free ports itself (inside the namespace in isolated mode).
Each worker gets the launcher's environment plus its own ``TF_CONFIG``. The launcher writes, in
``DIR``:

* ``net-ready``: the network is ready (isolated: loopback up and tested), before any worker starts;
* ``launch.json``: ``{"pids": [...], "hosts": [...]}`` once every worker has started;
* ``worker<i>.stderr``: worker ``i``'s stdout and stderr;
* ``status.json`` at the end: ``{"exit_codes": [...], "failed": i or null, "killed": [...],
  "stopped": bool}``.

It kills every worker still alive with SIGKILL (a worker waiting for a peer ignores SIGTERM), then
reaps them all, when

* a worker exits with an error (``failed``: the first such worker; its peers would wait forever),
* its stdin reaches end of file (``stopped``): ``run_workers`` closes it at the deadline and on any
  exception or KeyboardInterrupt, and the OS closes it if ``run_workers``' process dies,
* it gets SIGTERM, SIGHUP or SIGINT.

So its stdin must be a pipe that stays open while the run goes on (not ``/dev/null``).

Exit status: 0 (``status.json`` written), 3 (the private network could not be set up: the reason
is the last line on stderr), 4 (a worker could not be started).
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ['free_ports', 'tf_config', 'bring_up_loopback', 'main']

_POLL_S = 0.05
EXIT_NET = 3
EXIT_START = 4


def free_ports(n: int, host: str = '127.0.0.1') -> list[int]:
    """``n`` distinct TCP ports that are free on ``host`` right now (the OS picks them: port 0).

    All ``n`` sockets are open at once, so the ports differ. Another program could still take one
    before the worker binds it; that race is rare on a single machine (and impossible inside the
    private namespace of isolated mode) and ends in a clear ``WorkerError``.
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
        raise ValueError(f'`index` phải nằm trong [0, {len(hosts)}), nhận được {index}')
    return {'cluster': {'worker': list(hosts)}, 'task': {'type': 'worker', 'index': index}}


def _flags(sock: socket.socket, name: str) -> int:
    import fcntl
    import struct

    siocgifflags = 0x8913  # <linux/sockios.h>
    ifreq = fcntl.ioctl(sock, siocgifflags, struct.pack('16sH22x', name.encode(), 0))
    return struct.unpack('16sH22x', ifreq)[1]


def bring_up_loopback() -> None:
    """Bring the loopback interface ``lo`` up and check that TCP works on 127.0.0.1.

    Meant for a fresh network namespace, where ``lo`` exists but is down. Uses one
    ``ioctl(SIOCSIFFLAGS)`` (no extra package), or ``ip link set lo up`` if the ioctl is refused.
    Refuses (OSError) if any other interface of the namespace is up: then it is not private. (A
    fresh namespace may hold tunnel devices such as ``sit0`` or ``tunl0``; they stay down.)
    """
    import fcntl
    import shutil
    import struct

    siocsifflags, iff_up = 0x8914, 0x1  # <linux/sockios.h>, <net/if.h>
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        up = sorted(n for _, n in socket.if_nameindex() if n != 'lo' and _flags(s, n) & iff_up)
        if up:
            raise OSError(f'namespace mạng không riêng: các giao diện {up} đang bật')
        try:
            flags = _flags(s, 'lo')
            if not flags & iff_up:
                fcntl.ioctl(s, siocsifflags, struct.pack('16sH22x', b'lo', flags | iff_up))
        except OSError as err:
            ip = shutil.which('ip')
            if ip is None:
                raise OSError(f'không bật được giao diện lo: {err}') from err
            subprocess.run(
                [ip, 'link', 'set', 'lo', 'up'], check=True, stdin=subprocess.DEVNULL, timeout=30
            )
    with socket.socket() as server, socket.socket() as client:  # check: listen, connect, accept
        server.bind(('127.0.0.1', 0))
        server.listen(1)
        client.settimeout(10)
        client.connect(server.getsockname())
        server.settimeout(10)
        server.accept()[0].close()


def _write_json(path: Path, data: dict) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename: never half-written."""
    tmp = path.with_name(path.name + '.tmp')
    tmp.write_text(json.dumps(data), encoding='utf-8')
    os.replace(tmp, path)


_stop_requested: list[int] = []  # the signals received (SIGTERM, SIGHUP, SIGINT)


def _on_signal(signum, frame) -> None:
    _stop_requested.append(signum)  # a flag, not an exception: Popen is never cut half-way


def _run(out: Path) -> int:
    spec = json.loads((out / 'spec.json').read_text(encoding='utf-8'))
    cmds = spec['cmds']
    if spec.get('setup_net'):
        try:
            bring_up_loopback()
        except (OSError, subprocess.SubprocessError) as err:
            print(f'không dựng được mạng riêng: {err}', file=sys.stderr, flush=True)
            return EXIT_NET
    (out / 'net-ready').touch()
    hosts = spec.get('hosts') or [f'127.0.0.1:{p}' for p in free_ports(len(cmds))]

    procs: list[subprocess.Popen] = []
    killed: list[int] = []
    failed = None
    stopped = False
    try:
        for i, cmd in enumerate(cmds):
            if _stop_requested:
                break
            env = {**os.environ, 'TF_CONFIG': json.dumps(tf_config(hosts, i))}
            try:
                with open(out / f'worker{i}.stderr', 'w') as log:
                    procs.append(
                        subprocess.Popen(
                            cmd, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log
                        )
                    )
            except OSError as err:
                print(f'không khởi động được worker {i}: {err}', file=sys.stderr, flush=True)
                return EXIT_START
        if len(procs) == len(cmds):
            _write_json(out / 'launch.json', {'pids': [p.pid for p in procs], 'hosts': hosts})
        while not _stop_requested:
            codes = [p.poll() for p in procs]
            bad = [i for i, c in enumerate(codes) if c not in (None, 0)]
            if bad:
                failed = bad[0]
                break
            if all(c == 0 for c in codes):
                break
            readable, _, _ = select.select([sys.stdin], [], [], _POLL_S)
            if readable and not os.read(sys.stdin.fileno(), 4096):  # end of file: stop now
                break
        stopped = failed is None and any(p.poll() is None for p in procs)
    finally:  # on every way out, also an unexpected exception: no worker outlives the launcher
        for i, p in enumerate(procs):
            if p.poll() is None:
                p.kill()
                killed.append(i)
        for p in procs:
            p.wait()
    status = {
        'exit_codes': [p.returncode for p in procs],
        'failed': failed,
        'killed': killed,
        'stopped': stopped,
    }
    _write_json(out / 'status.json', status)
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(signum, _on_signal)
    if argv == ['--probe']:
        try:
            bring_up_loopback()
        except (OSError, subprocess.SubprocessError) as err:
            print(f'không dựng được mạng riêng: {err}', file=sys.stderr, flush=True)
            return EXIT_NET
        return 0
    if len(argv) != 1:
        print('cách dùng: python multiworker_launch.py DIR | --probe', file=sys.stderr)
        return 2
    return _run(Path(argv[0]))


if __name__ == '__main__':
    sys.exit(main())
