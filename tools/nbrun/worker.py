"""One notebook, run by papermill in a process of its own (started by ``run.py``).

    python -m nbrun.worker --source NB --output OUT.ipynb --scratch TMP.ipynb \
        --status STATUS.json --progress PROGRESS.json --cwd FOLDER --sockets FOLDER \
        [--parameters JSON]

It executes ``NB`` with ``papermill.execute_notebook`` (kernel ``python3``, which the runner's
JUPYTER_PATH points at the project's kernelspec) in ``FOLDER``, with two nbclient hooks that
papermill passes through: ``on_cell_start`` writes the cell being run to PROGRESS (so a timeout
or an interrupt can say where the notebook was), ``on_cell_error`` records the first error of a
cell (``SystemExit`` with status 0 ends a notebook cleanly, as papermill says). A notebook has no
cell whose error is expected: any error is a failure, and papermill's error banner stays at the top
of the executed notebook (``canonical`` drops it on a refresh).

The executed notebook goes to OUTPUT (atomically), then STATUS gets, as JSON: ``status``
(``ok`` or ``failed``), ``error`` (a ``summary.ErrorInfo``), ``kernel_seconds`` and ``output``
(whether OUTPUT was written).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import nbformat
import papermill
from jupyter_client.manager import AsyncKernelManager

from nbrun.atomic import atomic_write

from .notebook import one_line, write_notebook
from .summary import ErrorInfo


class IPCKernelManager(AsyncKernelManager):
    """The kernel's sockets are Unix sockets in ``socket_dir`` (``--sockets``, in the runner's
    private folder), not TCP ports: with TCP, the client picks free ports and the kernel
    binds them a moment later, so two kernels starting at once can pick the same one ("Address
    already in use", "Kernel died before replying to kernel_info"); and no port is open to other
    users of the machine."""

    socket_dir = ''

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.transport, self.ip = 'ipc', str(Path(self.socket_dir) / 'kernel')


def _parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog='python -m nbrun.worker', description=__doc__)
    for name in ('source', 'output', 'scratch', 'status', 'progress', 'cwd'):
        ap.add_argument(f'--{name}', required=True)
    ap.add_argument(
        '--sockets',
        required=True,
        help="folder for the kernel's sockets, made here and removed by the caller (a short "
        "path: a Unix socket's path holds at most 107 bytes)",
    )
    ap.add_argument('--parameters', default='{}', help='JSON mapping NAME: VALUE')
    return ap.parse_args(argv)


def _clean_exit(content: dict[str, Any]) -> bool:
    return content.get('ename') == 'SystemExit' and str(content.get('evalue', '')) in ('', '0')


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Execute the notebook; return what STATUS gets."""
    source = nbformat.read(args.source, as_version=4)
    index = {c.get('id'): i for i, c in enumerate(source.cells)}
    where: dict[str, Any] = {'cell': None, 'cell_id': None}
    errors: list[ErrorInfo] = []  # of the cells, in order (papermill stops at the first)

    def on_cell_start(cell: nbformat.NotebookNode, cell_index: int) -> None:
        where.update(cell=index.get(cell.get('id')), cell_id=cell.get('id'))
        atomic_write(args.progress, json.dumps(where))

    def on_cell_error(cell: nbformat.NotebookNode, cell_index: int, execute_reply: dict) -> None:
        content = execute_reply.get('content', {})
        if not _clean_exit(content):
            errors.append(
                ErrorInfo(
                    cell=index.get(cell.get('id')),
                    cell_id=cell.get('id'),
                    ename=content.get('ename', ''),
                    evalue=one_line(content.get('evalue', '')),
                )
            )

    crash = None
    try:
        papermill.execute_notebook(
            source,
            args.scratch,
            parameters=json.loads(args.parameters),
            kernel_name='python3',
            kernel_manager_class=IPCKernelManager,
            progress_bar=False,
            request_save_on_cell_execute=False,
            cwd=args.cwd,
            on_cell_start=on_cell_start,
            on_cell_error=on_cell_error,
        )
    except Exception as err:  # a cell failed (then `errors` says which), the kernel died, ...
        crash = ErrorInfo(**where, ename=type(err).__name__, evalue=one_line(err))
    error = errors[0] if errors else crash
    info: dict[str, Any] = {
        'status': 'failed' if error else 'ok',
        'error': error and asdict(error),
        'output': False,
    }

    if Path(args.scratch).exists():
        executed = nbformat.read(args.scratch, as_version=4)
        info['kernel_seconds'] = executed.metadata.get('papermill', {}).get('duration')
        write_notebook(executed, args.output)
        info['output'] = True
    return info


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    Path(args.sockets).mkdir(mode=0o700, parents=True, exist_ok=True)
    IPCKernelManager.socket_dir = args.sockets
    try:
        info = run(args)
    except Exception as err:  # reported to the runner, with the traceback in the log
        import traceback

        traceback.print_exc()
        error = ErrorInfo(ename=type(err).__name__, evalue=one_line(err))
        info = {'status': 'failed', 'error': asdict(error), 'output': False}
    atomic_write(args.status, json.dumps(info, ensure_ascii=False))
    return 0


if __name__ == '__main__':
    sys.exit(main())
