"""The runner's kernel: the kernelspec ``nbrun.kernel`` installs, and the kernel's sockets, which
are Unix sockets in a folder of their own, never TCP ports (two kernels starting at once could race
for the same free port)."""

from __future__ import annotations

import json
import os
import stat
import sys

import nbformat
from jupyter_client.kernelspec import KernelSpecManager
from nbrun import worker
from nbrun.kernel import KERNEL_ARGS, QUIET_ENV, install_kernelspec


def test_the_kernelspec_runs_this_python_quietly_and_can_be_installed_again(tmp_path):
    """``make`` installs it again whenever the environment changes."""
    install_kernelspec(tmp_path)
    path = install_kernelspec(tmp_path)
    spec = KernelSpecManager(kernel_dirs=[str(path.parents[1])]).get_kernel_spec('python3')
    assert spec.argv[:3] == [sys.executable, '-m', 'ipykernel_launcher']
    assert '{connection_file}' in spec.argv and set(KERNEL_ARGS) <= set(spec.argv)
    assert spec.env == QUIET_ENV and spec.language == 'python'


def test_the_kernel_manager_writes_an_ipc_connection_file(tmp_path, monkeypatch):
    monkeypatch.setattr(worker.IPCKernelManager, 'socket_dir', str(tmp_path))
    km = worker.IPCKernelManager(connection_file=str(tmp_path / 'kernel.json'))
    km.write_connection_file()
    info = json.loads((tmp_path / 'kernel.json').read_text())
    assert info['transport'] == 'ipc' and info['ip'] == str(tmp_path / 'kernel')


def test_the_worker_runs_papermill_with_its_sockets_in_the_folder_it_is_given(
    tmp_path, monkeypatch
):
    """The runner gives that folder, in its private folder, and removes it in every ending."""
    seen = {}

    def fake_execute(nb, output, **kwargs):
        folder = worker.IPCKernelManager.socket_dir
        seen.update(manager=kwargs['kernel_manager_class'], folder=folder)
        seen['mode'] = stat.S_IMODE(os.stat(folder).st_mode)

    monkeypatch.setattr(worker.papermill, 'execute_notebook', fake_execute)
    source = tmp_path / 'nb.ipynb'
    nbformat.write(nbformat.v4.new_notebook(), source)
    given = tmp_path / 'private' / '0.sockets'
    args = ['--source', str(source), '--output', str(tmp_path / 'out.ipynb')]
    args += ['--scratch', str(tmp_path / 's.ipynb'), '--status', str(tmp_path / 'status.json')]
    args += ['--progress', str(tmp_path / 'p.json'), '--cwd', str(tmp_path)]
    assert worker.main([*args, '--sockets', str(given)]) == 0
    assert json.loads((tmp_path / 'status.json').read_text())['status'] == 'ok'
    assert seen['manager'] is worker.IPCKernelManager
    assert seen['folder'] == str(given) and seen['mode'] == 0o700  # private
    assert given.is_dir()  # left to the runner
