"""Run notebooks in batch with papermill and write a summary and a report.

    python -m d2lhelpers.batch [NOTEBOOK_OR_DIR ...] [-p NAME VALUE ...] [-f params.yaml]
                               [--jobs N] [--out DIR] [--timeout SECONDS] [--inplace]

With no paths it runs ``notebooks/`` and ``exercises/``. Each notebook runs in its own subprocess
(papermill, with the notebook's folder as working directory and the kernel settings of
``d2lhelpers.kernel``), ``--jobs`` at a time; a notebook whose metadata says it measures time
(``metadata.d2l.measures_time``) always runs alone. A notebook that fails or passes ``--timeout``
(its kernel and every process it started are killed) does not stop the others; the exit status is
1 if any notebook did not end ``ok``.

``-p NAME VALUE`` (VALUE read as YAML: ``-p sizes "[64, 128]"``) goes to every notebook that declares
NAME in its ``parameters`` cell; a NAME that no notebook declares is an error. ``-f FILE`` is YAML:
top-level ``NAME: VALUE`` pairs for all notebooks, and ``notebooks: {PATH_OR_STEM: {NAME: VALUE}}``
for one notebook. A notebook that declares ``results_path`` is given one under ``OUT/results/``.

``--inplace`` is the refresh command for the committed notebooks: each is rewritten (in its
committed form, see ``d2lhelpers.notebook.canonical``) only after a successful run, atomically;
a failed run leaves it untouched. Parameters are refused with ``--inplace``: stored outputs come
from the defaults.

Writes ``OUT/summary.json``, ``OUT/report.md`` (with its plots) and the executed notebooks.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat
import yaml

from .kernel import KERNEL_ARGS, QUIET_ENV
from .notebook import canonical, declared_parameters, measures_time, write_atomic

__all__ = ['Job', 'collect', 'main', 'run_batch']

DEFAULT_DIRS = ('notebooks', 'exercises')


class UsageError(Exception):
    """A bad command line or parameter file (exit status 2)."""


@dataclass
class Job:
    source: Path                      # the notebook as committed
    name: str                         # its path relative to the current folder, for messages
    parameters: dict[str, Any]
    exclusive: bool                   # measures time: never beside another notebook
    output: Path = Path()
    result: dict[str, Any] = field(default_factory=dict)


def collect(paths: list[str]) -> list[Path]:
    """The notebooks named by ``paths`` (files or folders), in order, without duplicates."""
    found: list[Path] = []
    for p in paths or list(DEFAULT_DIRS):
        path = Path(p)
        if path.is_dir():
            items = sorted(q for q in path.rglob('*.ipynb') if '.ipynb_checkpoints' not in q.parts)
        elif path.is_file() and path.suffix == '.ipynb':
            items = [path]
        else:
            raise UsageError(f'not a notebook or a folder: {p}')
        found += [q.resolve() for q in items if q.resolve() not in found]
    if not found:
        raise UsageError(f'no notebooks found in {", ".join(paths or DEFAULT_DIRS)}')
    return found


def _display(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _plan(notebooks: list[Path], cli: dict[str, Any], per_nb: dict[str, dict[str, Any]],
          out: Path) -> list[Job]:
    jobs, used = [], set()
    for path in notebooks:
        nb = nbformat.read(path, as_version=4)
        declared = declared_parameters(nb)
        name = _display(path)
        params = {k: v for k, v in cli.items() if k in declared}
        used |= params.keys()
        for key in (name, path.stem, path.name):
            for k, v in per_nb.pop(key, {}).items():
                if k not in declared:
                    raise UsageError(f'{name} does not declare a parameter `{k}` '
                                     f'(it declares: {", ".join(declared) or "none"})')
                params[k] = v
        if 'results_path' in declared:
            params['results_path'] = str((out / 'results' / f'{path.stem}.json').resolve())
        jobs.append(Job(path, name, params, measures_time(nb)))
    unknown = set(cli) - used
    if unknown:
        raise UsageError(f'no notebook declares the parameter(s) {", ".join(sorted(unknown))}')
    if per_nb:
        raise UsageError(f'parameter file names notebooks that are not in this run: '
                         f'{", ".join(sorted(per_nb))}')
    return jobs


# --- one notebook in a subprocess -----------------------------------------------------------

_WORKER = r'''
import json, sys, papermill as pm
src, dst, params, status, extra = sys.argv[1:6]
try:
    pm.execute_notebook(src, dst, parameters=json.loads(params), kernel_name="python3",
                        progress_bar=False, request_save_on_cell_execute=False,
                        extra_arguments=json.loads(extra))
    info = {"status": "ok"}
except pm.PapermillExecutionError as e:
    line = (str(e.evalue).strip().splitlines() or [""])[0]
    info = {"status": "failed", "error": {"cell": e.cell_index, "ename": e.ename, "evalue": line}}
except Exception as e:
    line = (str(e).strip().splitlines() or [""])[0]
    info = {"status": "failed", "error": {"cell": None, "ename": type(e).__name__, "evalue": line}}
open(status, "w").write(json.dumps(info))
'''


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (Linux /proc; the kernel runs in a session of its own)."""
    children: dict[int, list[int]] = {}
    for entry in Path('/proc').glob('[0-9]*'):
        try:
            ppid = int((entry / 'stat').read_text().rsplit(')', 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _kill_tree(proc: subprocess.Popen) -> None:
    for pid in [*_descendants(proc.pid), proc.pid]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()


def run_one(job: Job, timeout: float, log_dir: Path) -> dict[str, Any]:
    """Execute one notebook; return its summary entry (never raises for a notebook's failure)."""
    job.output.parent.mkdir(parents=True, exist_ok=True)
    status_file = log_dir / f'{job.source.stem}.status.json'
    status_file.unlink(missing_ok=True)
    env = {**os.environ, **QUIET_ENV}
    start = time.perf_counter()
    with open(log_dir / f'{job.source.stem}.log', 'w') as log:
        proc = subprocess.Popen(
            [sys.executable, '-c', _WORKER, str(job.source), str(job.output),
             json.dumps(job.parameters), str(status_file), json.dumps(KERNEL_ARGS)],
            cwd=job.source.parent, env=env, stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            proc.wait(timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            _kill_tree(proc)  # also any kernel or worker left behind after a normal end
    seconds = time.perf_counter() - start
    entry: dict[str, Any] = {'notebook': job.name, 'seconds': round(seconds, 2),
                             'parameters': {k: v for k, v in job.parameters.items()
                                            if k != 'results_path'},
                             'ran': 'alone (measures time)' if job.exclusive else 'beside others',
                             'output': _display(job.output), 'error': None, 'results': None}
    if timed_out:
        entry.update(status='timeout', error={'cell': None, 'ename': 'Timeout',
                                              'evalue': f'killed after {timeout:g} s'})
    elif status_file.exists():
        info = json.loads(status_file.read_text())
        entry.update(status=info['status'], error=info.get('error'))
    else:
        tail = (log_dir / f'{job.source.stem}.log').read_text(errors='replace').strip().splitlines()
        entry.update(status='failed', error={'cell': None, 'ename': 'WorkerDied',
                                             'evalue': tail[-1] if tail else f'exit {proc.returncode}'})
    results_path = job.parameters.get('results_path')
    if entry['status'] == 'ok' and results_path and Path(results_path).exists():
        entry['results'] = json.loads(Path(results_path).read_text())
    return entry


# --- the batch ------------------------------------------------------------------------------

def _progress(done: int, total: int, entry: dict[str, Any]) -> None:
    width = 20
    bar = '#' * (width * done // total) + '.' * (width - width * done // total)
    why = ''
    if entry['error']:
        why = f" ({entry['error']['ename']}: {entry['error']['evalue']})"[:160]
    print(f"[{bar}] {done}/{total} {entry['status']:7} {entry['seconds']:7.1f} s  "
          f"{entry['notebook']}{why}", flush=True)


def run_batch(jobs: list[Job], *, jobs_at_once: int, timeout: float, out: Path,
              inplace: bool) -> list[dict[str, Any]]:
    log_dir = out / 'logs'
    log_dir.mkdir(parents=True, exist_ok=True)
    for job in jobs:
        try:
            rel = job.source.relative_to(Path.cwd())
        except ValueError:
            rel = Path(job.source.name)
        job.output = (out / rel).resolve()
    lock, done, entries = threading.Lock(), [0], {}

    def work(job: Job) -> None:
        entry = run_one(job, timeout, log_dir)
        if inplace and entry['status'] == 'ok':
            write_atomic(canonical(nbformat.read(job.output, as_version=4)), job.source)
            entry['refreshed'] = True
        with lock:
            entries[job.name] = entry
            done[0] += 1
            _progress(done[0], len(jobs), entry)

    shared = [j for j in jobs if not j.exclusive]
    alone = [j for j in jobs if j.exclusive]
    print(f'{len(jobs)} notebook(s): {len(shared)} at most {jobs_at_once} at a time, '
          f'{len(alone)} alone because they measure time', flush=True)
    with ThreadPoolExecutor(max_workers=jobs_at_once) as pool:
        list(pool.map(work, shared))
    for job in alone:
        work(job)
    return [entries[j.name] for j in jobs]


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog='python -m d2lhelpers.batch', description=__doc__.split('\n\n')[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('paths', nargs='*', metavar='NOTEBOOK_OR_DIR')
    ap.add_argument('-p', '--parameter', nargs=2, action='append', default=[],
                    metavar=('NAME', 'VALUE'), help='a parameter for every notebook that declares it')
    ap.add_argument('-f', '--parameters-file', help='YAML file of parameters')
    ap.add_argument('--jobs', type=int, default=os.cpu_count() or 1)
    ap.add_argument('--out', default='build')
    ap.add_argument('--timeout', type=float, default=1800, help='seconds per notebook')
    ap.add_argument('--inplace', action='store_true',
                    help='rewrite the committed notebooks after a successful run')
    ap.add_argument('--no-report', action='store_true', help='write summary.json only')
    return ap.parse_args(argv)


def _parameters(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    cli: dict[str, Any] = {}
    per_nb: dict[str, dict[str, Any]] = {}
    if args.parameters_file:
        try:
            data = yaml.safe_load(Path(args.parameters_file).read_text(encoding='utf-8')) or {}
        except (OSError, yaml.YAMLError) as err:
            raise UsageError(f'cannot read parameter file {args.parameters_file}: {err}') from err
        if not isinstance(data, dict):
            raise UsageError(f'parameter file {args.parameters_file} must hold a mapping')
        per_nb = data.pop('notebooks', {}) or {}
        if not isinstance(per_nb, dict) or not all(isinstance(v, dict) for v in per_nb.values()):
            raise UsageError('`notebooks:` in the parameter file must map notebooks to mappings')
        cli.update(data)
    for name, value in args.parameter:
        try:
            cli[name] = yaml.safe_load(value)
        except yaml.YAMLError as err:
            raise UsageError(f'-p {name}: cannot read {value!r} as YAML ({err})') from err
    if 'results_path' in cli or any('results_path' in v for v in per_nb.values()):
        raise UsageError('results_path is set by the runner (under --out); do not pass it')
    return cli, per_nb


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    try:
        if args.jobs < 1:
            raise UsageError(f'--jobs must be >= 1, got {args.jobs}')
        if args.timeout <= 0:
            raise UsageError(f'--timeout must be > 0, got {args.timeout:g}')
        cli, per_nb = _parameters(args)
        if args.inplace and (cli or per_nb):
            raise UsageError('--inplace refreshes the stored outputs, which come from the default '
                             'parameters: drop -p/-f')
        out = Path(args.out)
        jobs = _plan(collect(args.paths), cli, per_nb, out)
    except UsageError as err:
        print(f'error: {err}', file=sys.stderr)
        return 2
    started = time.perf_counter()
    entries = run_batch(jobs, jobs_at_once=args.jobs, timeout=args.timeout, out=out,
                        inplace=args.inplace)
    wall = time.perf_counter() - started
    summary = {'wall_seconds': round(wall, 2), 'jobs': args.jobs, 'inplace': args.inplace,
               'notebooks': entries}
    (out / 'summary.json').write_text(json.dumps(summary, indent=2, ensure_ascii=False) + '\n',
                                      encoding='utf-8')
    if not args.no_report:
        from .report import write_report
        write_report(summary, out)
    bad = [e for e in entries if e['status'] != 'ok']
    print(f'{len(entries) - len(bad)}/{len(entries)} ok in {wall:.1f} s; summary: '
          f'{_display((out / "summary.json").resolve())}')
    for e in bad:
        print(f"  {e['status']}: {e['notebook']}: {e['error']['ename']}: {e['error']['evalue']}"
              + (f" (cell {e['error']['cell']})" if e['error'].get('cell') is not None else ''))
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
