"""How much time the batch runner adds: ``python -m nbrun`` (one notebook after the other)
against the sum of the notebooks' own execution times (target: within 10%). It prints
figures; it is not a test.

    python benchmarks/batch_overhead.py                  # 3 generated notebooks of ~20 s each
    python benchmarks/batch_overhead.py --count 5 --work 30
    python benchmarks/batch_overhead.py exercises        # real notebooks (figures into a temp dir)

A notebook's own time is taken two ways from the executed notebook: from the kernel's start to
its last cell (papermill's notebook ``duration``), and the sum of its cells' durations. The
generated notebooks sleep (``--work`` seconds over a few cells), so they cost no CPU and the
figures stay readable on a loaded machine; the load average is printed with them all the same.
Run from the repository root (``make bench``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbrun.summary import machine

TARGET = 1.10


def make_notebooks(folder: Path, count: int, work: float) -> list[str]:
    """``count`` notebooks of 5 cells, each ``work`` seconds of sleep in total."""
    paths = []
    for i in range(count):
        cells = [nbformat.v4.new_markdown_cell(f'# Notebook {i} (benchmark)', id='title')]
        cells += [
            nbformat.v4.new_code_cell(f'import time\ntime.sleep({work / 5:g})\n{k}', id=f'work-{k}')
            for k in range(5)
        ]
        nb = nbformat.v4.new_notebook(
            cells=cells,
            metadata={
                'kernelspec': {
                    'name': 'python3',
                    'display_name': 'Python 3 (ipykernel)',
                    'language': 'python',
                },
                'language_info': {'name': 'python'},
            },
        )
        path = folder / f'bench-{i}.ipynb'
        nbformat.write(nb, path)
        paths.append(str(path))
    return paths


def cells_seconds(path: Path) -> float:
    nb = nbformat.read(path, as_version=4)
    return sum(c.metadata.get('papermill', {}).get('duration') or 0 for c in nb.cells)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('paths', nargs='*', help='notebooks or folders (default: generated ones)')
    ap.add_argument('--count', type=int, default=3, help='generated notebooks (default 3)')
    ap.add_argument(
        '--work',
        type=float,
        default=20.0,
        help='seconds of work in each generated notebook (default 20)',
    )
    ap.add_argument(
        '--no-report',
        action='store_true',
        help='leave out the report (and its environment report, which imports TF)',
    )
    args = ap.parse_args()

    # below the current folder, as the runner wants every notebook (build/ is not committed)
    Path('build').mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix='batch-bench-', dir='build') as tmp:
        tmp = Path(tmp).resolve()
        paths = args.paths or make_notebooks(tmp, args.count, args.work)
        out = tmp / 'out'
        cmd = [sys.executable, '-m', 'nbrun', *paths, '--out', str(out)]
        if args.no_report:
            cmd.append('--no-report')
        load = os.getloadavg()[0]
        start = time.perf_counter()
        run = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - start
        if not (out / 'summary.json').exists():
            print(run.stdout, run.stderr, sep='\n')
            return run.returncode or 1
        summary = json.loads((out / 'summary.json').read_text(encoding='utf-8'))

        print(
            f'load average (1 min): {load:.2f} before, {os.getloadavg()[0]:.2f} after; '
            f'{machine()["cores"]} cores'
        )
        print(f'{"notebook":40} {"status":8} {"runner":>9} {"kernel":>9} {"cells":>9} {"added":>8}')
        kernel_sum = cells_sum = runner_sum = 0.0
        for e in summary['notebooks']:
            kernel = e.get('kernel_seconds') or 0.0
            cells = cells_seconds(out / e['output']) if e.get('output') else 0.0
            kernel_sum += kernel
            cells_sum += cells
            runner_sum += e['seconds']
            print(
                f'{e["notebook"][-40:]:40} {e["status"]:8} {e["seconds"]:8.2f}s {kernel:8.2f}s '
                f'{cells:8.2f}s {e["seconds"] - kernel:7.2f}s'
            )
        n = len(summary['notebooks'])
        batch_wall = summary['wall_seconds']
        print(f'{"sum":40} {"":8} {runner_sum:8.2f}s {kernel_sum:8.2f}s {cells_sum:8.2f}s')
        print()
        print(
            "runner = the runner's time for the notebook (worker start, papermill, kernel, "
            "cells); kernel = kernel start to last cell; cells = sum of the cells' durations"
        )
        print(f'batch wall time (no report):            {batch_wall:8.2f} s')
        print(
            f'whole command (with report):            {wall:8.2f} s'
            + (
                f'  (report {summary.get("report_seconds", 0):.2f} s, of which the '
                'environment report imports TensorFlow)'
                if not args.no_report
                else ''
            )
        )
        print(f'overhead per notebook (runner - kernel): {(runner_sum - kernel_sum) / n:8.2f} s')
        for label, own in (('kernel start to end', kernel_sum), ('sum of cells', cells_sum)):
            if own > 0:
                print(
                    f'ratio against {label:20} batch {batch_wall / own:5.3f}, '
                    f'whole command {wall / own:5.3f}  (target <= {TARGET:.2f}: '
                    f'{"met" if wall / own <= TARGET else "not met"} for the whole command)'
                )
        if run.returncode:
            print(
                f'\nnote: the batch exited {run.returncode} (a notebook failed):\n'
                + run.stdout[-2000:]
            )
    return 0


if __name__ == '__main__':
    sys.exit(main())
