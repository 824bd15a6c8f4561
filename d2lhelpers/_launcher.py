"""The launcher of ``run_workers`` (standard library only), run as ``python _launcher.py FOLDER
SPEC``, inside the private network namespace when there is one. SPEC (JSON): ``cmds`` (one per
worker), ``hosts`` (the cluster; None: free ports on 127.0.0.1 here), ``caller_ns`` (the caller's
network namespace, when this one must be private). In FOLDER, where the workers run, it writes
``launch.json`` (pids, hosts), ``worker<i>.log`` (stdout and stderr) and, once every worker has
been killed (SIGKILL: nothing delays it) and reaped, ``status.json``. It does so as soon as all
have ended, one has failed, a signal came, or its stdin says stop: a byte from the caller, or the
end of the stream without it (the caller died: it then removes FOLDER itself).

``python _launcher.py --probe CALLER_NS`` only checks, in the namespace ``unshare`` made, that it
is private and that its loopback comes up (exit 0), else exits 1 with the reason on stderr.
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
from pathlib import Path

# Requests of <linux/sockios.h> and the flag of <linux/if.h>, for ioctl on a socket.
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
IFREQ = '16sH22x'  # struct ifreq: the interface's name, its flags, padding to 40 bytes
POLL_S = 0.05  # seconds between two looks at the workers


def free_hosts(n: int) -> list[str]:
    """``n`` distinct free ports on 127.0.0.1 (all sockets open at once), as ``host:port``."""
    sockets = [socket.create_server(('127.0.0.1', 0)) for _ in range(n)]
    hosts = [f'127.0.0.1:{s.getsockname()[1]}' for s in sockets]
    for s in sockets:
        s.close()
    return hosts


def bring_up_loopback(caller_ns: str) -> None:
    """Check that this network namespace is not the caller's, bring ``lo`` up, check TCP on it;
    exit (code 1, the reason on stderr) if any step fails."""
    import fcntl
    import struct

    try:
        if os.readlink('/proc/self/ns/net') == caller_ns:
            raise OSError('namespace mạng không riêng: đây là mạng của máy')
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            request = struct.pack(IFREQ, b'lo', 0)
            _, flags = struct.unpack(IFREQ, fcntl.ioctl(s, SIOCGIFFLAGS, request))
            fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack(IFREQ, b'lo', flags | IFF_UP))
        with socket.create_server(('127.0.0.1', 0)) as server:
            socket.create_connection(server.getsockname(), timeout=10).close()
    except OSError as err:
        sys.exit(f'không dựng được mạng riêng: {err}')


def watch(procs: list[subprocess.Popen], signals: list[int]) -> str:
    """The first reason to stop: ``'done'`` (every worker exited 0), ``'failed'``, ``'signal'``,
    ``'stop'`` (the caller's byte) or ``'orphaned'`` (stdin ended: the caller died)."""
    while not signals:
        codes = [p.poll() for p in procs]
        if all(code == 0 for code in codes):
            return 'done'
        if any(code not in (None, 0) for code in codes):
            return 'failed'
        if select.select([sys.stdin], [], [], POLL_S)[0]:
            return 'stop' if os.read(sys.stdin.fileno(), 4096) else 'orphaned'
    return 'signal'


def launch(folder: Path, spec: dict) -> None:
    signals: list[int] = []  # a signal only sets this flag: a Popen is never cut half-way
    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(signum, lambda signum, frame: signals.append(signum))
    if spec['caller_ns'] is not None:
        bring_up_loopback(spec['caller_ns'])
    hosts = spec['hosts'] or free_hosts(len(spec['cmds']))
    procs: list[subprocess.Popen] = []
    ending = 'signal'
    try:
        for i, cmd in enumerate(spec['cmds']):
            config = {'cluster': {'worker': hosts}, 'task': {'type': 'worker', 'index': i}}
            env = {**os.environ, 'TF_CONFIG': json.dumps(config)}
            with open(folder / f'worker{i}.log', 'w') as log:
                procs.append(
                    subprocess.Popen(
                        cmd, cwd=folder, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log
                    )
                )
        (folder / 'launch.json').write_text(
            json.dumps({'pids': [p.pid for p in procs], 'hosts': hosts})
        )
        ending = watch(procs, signals)
    finally:  # every way out: no worker outlives the launcher
        killed = [i for i, p in enumerate(procs) if p.poll() is None]
        for p in procs:
            p.kill()  # does nothing to a process that has ended
            p.wait()
    codes = [p.returncode for p in procs]
    failed = next((i for i, code in enumerate(codes) if code and i not in killed), None)
    status = {'codes': codes, 'failed': failed, 'killed': killed}
    (folder / 'status.json').write_text(json.dumps(status))
    if ending == 'orphaned':  # nobody else will remove the folder
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == '__main__':
    if sys.argv[1] == '--probe':  # ``--probe CALLER_NS``: only check the private network
        bring_up_loopback(sys.argv[2])
    else:
        launch(Path(sys.argv[1]), json.loads(sys.argv[2]))
