"""Run notebooks in batch with papermill and write a summary and a report.

    python -m d2lhelpers.batch [NOTEBOOK_OR_DIR ...] [-p NAME VALUE ...] [-f params.yaml]
                               [--jobs N] [--out DIR] [--timeout SECONDS] [--inplace]

With no paths it runs ``notebooks/`` and ``exercises/``. Each notebook runs in its own subprocess
(papermill, with the notebook's folder as working directory, as under nbval, and the kernel
settings of ``d2lhelpers.kernel``), ``--jobs`` at a time; a notebook whose metadata says it
measures time (``metadata.d2l.measures_time``) always runs alone. A notebook that fails or passes
``--timeout`` (its kernel and every process it started are killed, even one stuck in native code)
does not stop the others; the exit status is 1 if any notebook did not end ``ok``, 2 for a bad
command line (nothing is run then), 130 when interrupted.

``-p NAME VALUE`` (VALUE read as YAML: ``-p sizes "[64, 128]"``) goes to every notebook that declares
NAME in its ``parameters`` cell; a NAME that no notebook of the run declares is an error. ``-f FILE``
is YAML: top-level ``NAME: VALUE`` pairs (like ``-p``), and ``notebooks: {PATH_OR_STEM: {NAME: VALUE}}``
for one notebook. A notebook that declares ``results_path`` is given ``OUT/results/<name>.json``;
its JSON becomes the ``results`` of its summary entry.

``--inplace`` is the refresh command for the committed notebooks: each is rewritten (its committed
cells with the new outputs, see ``d2lhelpers.notebook.refreshed``) only after a successful run,
atomically; a failed run leaves it byte for byte untouched, and so does a notebook edited while
it ran. Parameters are refused with ``--inplace``: stored outputs come from the defaults (so
``results_path`` is not injected either).

Writes ``OUT/summary.json``, ``OUT/report.md`` (with its plots), the executed notebooks under
``OUT/`` and one log per notebook under ``OUT/logs/``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __name__ == '__main__':
    # jsonschema (under nbformat) compiles an IRI grammar on import when `rfc3987_syntax` is
    # installed: ~3 s per process, for a format no notebook schema uses. The runner and its
    # workers do without it.
    sys.modules.setdefault('rfc3987_syntax', None)  # type: ignore[assignment]

import nbformat
import yaml

from .kernel import QUIET_ENV, available_cores, install_kernelspec
from .notebook import (
    declared_parameters,
    for_papermill,
    measures_time,
    one_line,
    refreshed,
    write_atomic,
)

__all__ = ['Job', 'UsageError', 'collect', 'plan', 'run_one', 'run_batch', 'main']

DEFAULT_DIRS = ('notebooks', 'exercises')
TOKEN_VAR = 'D2L_BATCH_TOKEN'  # in the environment of a job's worker, kernel and their children


class UsageError(Exception):
    """A bad command line or parameter file (exit status 2, before anything runs)."""


@dataclass
class Job:
    source: Path  # the notebook as committed (absolute)
    name: str  # its path relative to the current folder, for messages
    key: str  # unique file-name-safe name (logs, results, status)
    parameters: dict[str, Any]
    exclusive: bool  # measures time: never beside another notebook
    digest: str = ''  # sha256 of the source when planned (--inplace guard)
    output: Path = Path()


def collect(paths: list[str]) -> list[Path]:
    """The notebooks named by ``paths`` (files or folders), in order, without duplicates.

    With no paths: ``notebooks/`` and ``exercises/`` (a missing one of them is skipped).
    """
    found: list[Path] = []
    for p in paths or list(DEFAULT_DIRS):
        path = Path(p)
        if path.is_dir():
            items = sorted(
                q
                for q in path.rglob('*.ipynb')
                if '.ipynb_checkpoints' not in q.parts and not q.name.startswith('.')
            )
        elif path.is_file() and path.suffix == '.ipynb':
            items = [path]
        elif not paths and not path.exists():
            continue
        else:
            raise UsageError(f'not a notebook or a folder: {p}')
        found += [q.resolve() for q in items if q.resolve() not in found]
    if not found:
        raise UsageError(f'no notebooks found in {", ".join(paths or DEFAULT_DIRS)}')
    return found


def _display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _key(name: str) -> str:
    stem = name[:-6] if name.endswith('.ipynb') else name
    return ''.join(c if c.isalnum() or c in '-_.' else '__' for c in stem.lstrip('./'))


def plan(
    notebooks: list[Path],
    cli: dict[str, Any],
    per_nb: dict[str, dict[str, Any]],
    out: Path,
    inplace: bool = False,
) -> list[Job]:
    """One ``Job`` per notebook; raises ``UsageError`` for a parameter nobody declares."""
    jobs, used, per_nb = [], set(), dict(per_nb)
    for path in notebooks:
        try:
            raw = path.read_bytes()
            nb = nbformat.reads(raw.decode('utf-8'), as_version=4)
            declared = declared_parameters(nb)
        except Exception as err:  # noqa: BLE001 - any unreadable notebook is a usage error
            raise UsageError(f'cannot read {_display(path)}: {one_line(err)}') from err
        name = _display(path)
        params = {k: v for k, v in cli.items() if k in declared}
        used |= params.keys()
        for key in (name, name[:-6], path.stem, path.name):
            for k, v in (per_nb.pop(key, None) or {}).items():
                if k not in declared:
                    raise UsageError(
                        f'{name} does not declare a parameter `{k}` '
                        f'(it declares: {", ".join(declared) or "none"})'
                    )
                params[k] = v
        job = Job(
            path,
            name,
            _key(name),
            params,
            measures_time(nb),
            digest=hashlib.sha256(raw).hexdigest(),
        )
        if 'results_path' in declared and not inplace:
            params['results_path'] = str((out / 'results' / f'{job.key}.json').resolve())
        jobs.append(job)
    unknown = set(cli) - used
    if unknown:
        raise UsageError(
            f'no notebook of this run declares the parameter(s) '
            f'{", ".join(f"`{u}`" for u in sorted(unknown))}'
        )
    if per_nb:
        raise UsageError(
            f'the parameter file names notebooks that are not in this run: '
            f'{", ".join(sorted(per_nb))}'
        )
    return jobs


# --- one notebook in a subprocess -----------------------------------------------------------

# The worker: papermill with our kernel arguments. It records the cell it is running (so a
# timeout can say where it stopped), and it judges errors itself: papermill would also count the
# error of a cell that teaches one (tag `raises-exception`), which nbclient let through.
_WORKER = r"""
import json, sys, time
src, dst, params, status, progress, pkg = sys.argv[1:7]
sys.path.insert(0, pkg)
sys.modules.setdefault("rfc3987_syntax", None)  # see the top of d2lhelpers/batch.py
import nbformat
import papermill as pm
from papermill import engines, execute
from d2lhelpers.notebook import first_error, one_line

_cell_start = engines.NotebookExecutionManager.cell_start
def cell_start(self, cell, cell_index=None, **kwargs):
    with open(progress, "w") as f:
        json.dump({"index": cell_index, "id": cell.get("id"), "time": time.time()}, f)
    return _cell_start(self, cell, cell_index, **kwargs)
engines.NotebookExecutionManager.cell_start = cell_start
execute.raise_for_execution_errors = lambda nb, output_path: None

info = {"status": "ok", "error": None}
try:
    nb = pm.execute_notebook(src, dst, parameters=json.loads(params), kernel_name="python3",
                             progress_bar=False, request_save_on_cell_execute=False)
    info["kernel_seconds"] = nb.metadata.get("papermill", {}).get("duration")
    if nb.cells and nb.cells[-1].get("id") == "%(env_id)s":
        for out in nb.cells.pop().get("outputs", []):
            if out.get("name") == "stdout" and out.get("text", "").strip():
                try:
                    info["environment"] = json.loads(out["text"].strip().splitlines()[-1])
                except ValueError:
                    pass
        nbformat.write(nb, dst)
    err = first_error(nb)
    if err is None and nb.metadata.get("papermill", {}).get("exception"):
        err = {"cell": None, "ename": "CellExecutionError", "evalue": "a cell failed without an error output"}
    if err is not None:
        info = {**info, "status": "failed", "error": err}
except Exception as e:
    info = {"status": "failed",
            "error": {"cell": None, "ename": type(e).__name__, "evalue": one_line(e)}}
with open(status + ".tmp", "w") as f:
    json.dump(info, f)
import os; os.replace(status + ".tmp", status)
"""

# Appended to each run (and removed from its output): if the notebook imported TensorFlow, its
# kernel reports the environment for the batch report at no cost (else the report starts a
# fresh interpreter for it).
ENV_CELL_ID = 'd2l-batch-environment'
_ENV_CELL = """import sys as _sys
if 'tensorflow' in _sys.modules:
    try:
        import json as _json
        from d2lhelpers import env_report as _env_report
        print(_json.dumps(_env_report().as_dict(), default=str))
    except Exception:
        pass"""

_WORKER = _WORKER.replace('%(env_id)s', ENV_CELL_ID)

_RUNNING: dict[int, tuple[subprocess.Popen, str]] = {}  # worker pid -> (process, token)
_RUNNING_LOCK = threading.Lock()


def _proc_table() -> dict[int, int]:
    """pid -> parent pid, from /proc."""
    table = {}
    for entry in Path('/proc').glob('[0-9]*'):
        try:
            table[int(entry.name)] = int((entry / 'stat').read_text().rsplit(')', 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
    return table


def _descendants(pid: int, table: dict[int, int] | None = None) -> list[int]:
    """Every process below ``pid`` (the kernel runs in a session of its own, so not a group kill)."""
    children: dict[int, list[int]] = {}
    for child, parent in (table if table is not None else _proc_table()).items():
        children.setdefault(parent, []).append(child)
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _with_token(token: str, pids: list[int]) -> list[int]:
    """Processes whose environment carries ``token``: a job's processes, even once orphaned."""
    needle = f'{TOKEN_VAR}={token}'.encode()
    found = []
    for pid in pids:
        try:
            if needle in Path(f'/proc/{pid}/environ').read_bytes().split(b'\0'):
                found.append(pid)
        except OSError:
            continue
    return found


def job_processes(proc: subprocess.Popen, token: str) -> list[int]:
    """The worker's descendants plus any process that inherited the job's token."""
    table = _proc_table()
    pids = set(_descendants(proc.pid, table)) | set(_with_token(token, list(table)))
    pids.discard(os.getpid())
    return sorted(pids)


def alive(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie (a killed, not yet reaped process)."""
    try:
        state = Path(f'/proc/{pid}/stat').read_text().rsplit(')', 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ('Z', 'X')


def _kill_tree(proc: subprocess.Popen, token: str, grace: float = 5.0) -> None:
    """SIGKILL the worker, its kernel and everything they started; wait until all are dead."""
    killed: set[int] = set()
    for _ in range(20):
        pids = job_processes(proc, token)
        if proc.poll() is None:
            pids.append(proc.pid)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except (ProcessLookupError, PermissionError):
                pass
        proc.poll()
        time.sleep(0.02)
    proc.wait()
    deadline = time.monotonic() + grace
    while any(alive(pid) for pid in killed) and time.monotonic() < deadline:
        time.sleep(0.02)


def kill_all() -> None:
    """Kill every job still running (Ctrl-C, SIGTERM)."""
    with _RUNNING_LOCK:
        running = list(_RUNNING.values())
    for proc, token in running:
        _kill_tree(proc, token)


def _error_at(job: Job, progress: Path, ename: str, evalue: str) -> dict[str, Any]:
    """An error located at the cell the worker last started (for timeouts and crashes)."""
    err: dict[str, Any] = {'cell': None, 'ename': ename, 'evalue': evalue}
    try:
        where = json.loads(progress.read_text())
        nb = nbformat.read(job.source, as_version=4)
        ids = [c.get('id') for c in nb.cells]
        if where.get('id') in ids:
            err['cell'] = ids.index(where['id'])
            err['cell_id'] = where['id']
        elif where.get('index') is not None:
            err['cell'] = where['index']
    except (OSError, ValueError):
        pass
    return err


def kernel_env(folder: Path) -> dict[str, str]:
    """The environment in which papermill finds our ``python3`` kernel, whatever JUPYTER_PATH says.

    The kernelspec (this interpreter, ``KERNEL_ARGS``, ``QUIET_ENV``: the kernel nbval uses under
    ``make``) is written under ``folder`` and put first on JUPYTER_PATH. Each batch uses a folder
    of its own (two runs sharing ``--out`` never read each other's half-written kernelspec).
    """
    data = folder / 'share' / 'jupyter'
    install_kernelspec(folder)
    path = [
        str(data.resolve()),
        *filter(None, os.environ.get('JUPYTER_PATH', '').split(os.pathsep)),
    ]
    # PYTHONHASHSEED as `make` sets it for nbval too: set and dict-of-str orders match.
    return {
        **QUIET_ENV,
        'JUPYTER_PATH': os.pathsep.join(path),
        'PYTHONHASHSEED': os.environ.get('PYTHONHASHSEED', '0'),
    }


def run_one(
    job: Job,
    timeout: float,
    log_dir: Path,
    t0: float | None = None,
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Execute one notebook; return its summary entry (never raises for a notebook's failure).

    ``env`` (default: ``kernel_env`` of a temporary folder) is added to this process's environment.
    """
    if env is None:
        with tempfile.TemporaryDirectory(prefix='d2l-kernel-') as tmp:
            return run_one(job, timeout, log_dir, t0, kernel_env(Path(tmp)))
    t0 = time.perf_counter() if t0 is None else t0
    job.output.parent.mkdir(parents=True, exist_ok=True)
    status = log_dir / f'{job.key}.status.json'
    progress = log_dir / f'{job.key}.progress.json'
    source = log_dir / f'{job.key}.input.ipynb'
    log = log_dir / f'{job.key}.log'
    for stale in (status, progress, job.output):
        stale.unlink(missing_ok=True)
    results_path = job.parameters.get('results_path')
    if results_path:
        Path(results_path).unlink(missing_ok=True)
    prepared = for_papermill(nbformat.read(job.source, as_version=4))
    prepared.cells.append(nbformat.v4.new_code_cell(_ENV_CELL, id=ENV_CELL_ID))
    nbformat.write(prepared, source)
    token = f'{os.getpid()}-{job.key}-{uuid.uuid4().hex[:8]}'
    env = {**os.environ, **env, TOKEN_VAR: token, 'PYTHONUNBUFFERED': '1'}
    start = time.perf_counter()
    with open(log, 'w') as log_file:
        proc = subprocess.Popen(
            [
                sys.executable,
                '-c',
                _WORKER,
                str(source),
                str(job.output),
                json.dumps(job.parameters),
                str(status),
                str(progress),
                str(Path(__file__).resolve().parent.parent),
            ],
            cwd=job.source.parent,
            env=env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        with _RUNNING_LOCK:
            _RUNNING[proc.pid] = (proc, token)
        try:
            proc.wait(timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            _kill_tree(proc, token)  # also a kernel or child left behind after a normal end
            with _RUNNING_LOCK:
                _RUNNING.pop(proc.pid, None)
    end = time.perf_counter()
    entry: dict[str, Any] = {
        'notebook': job.name,
        'status': 'failed',
        'seconds': round(end - start, 2),
        'error': None,
        'parameters': {k: v for k, v in job.parameters.items() if k != 'results_path'},
        'results': None,
        'kernel_seconds': None,
        'measures_time': job.exclusive,
        'start': round(start - t0, 2),
        'end': round(end - t0, 2),
        'output': _display(job.output) if job.output.exists() else None,
        'log': _display(log),
    }
    if timed_out:
        entry.update(
            status='timeout',
            error=_error_at(job, progress, 'Timeout', f'killed after {timeout:g} s (--timeout)'),
        )
    elif status.exists():
        info = json.loads(status.read_text())
        entry.update(
            status=info['status'],
            error=info.get('error'),
            kernel_seconds=info.get('kernel_seconds'),
        )
        if info.get('environment'):
            entry['environment'] = info['environment']
    else:
        lines = log.read_text(errors='replace').strip().splitlines()
        entry['error'] = _error_at(
            job,
            progress,
            'WorkerDied',
            one_line(lines[-1]) if lines else f'exit status {proc.returncode}',
        )
    if entry['status'] == 'ok' and results_path:
        try:
            entry['results'] = json.loads(Path(results_path).read_text(encoding='utf-8'))
        except FileNotFoundError:
            pass
        except ValueError as err:
            entry['results'] = {'error': f'unreadable results file: {one_line(err)}'}
    for tmp in (source, progress, status):
        tmp.unlink(missing_ok=True)
    return entry


# --- the batch ------------------------------------------------------------------------------


def _bar(done: int, total: int, width: int = 20) -> str:
    filled = width * done // total
    return f'[{"#" * filled}{"." * (width - filled)}] {done}/{total}'


def _progress(done: int, total: int, entry: dict[str, Any]) -> None:
    why = ''
    if entry['error']:
        err = entry['error']
        cell = f' in cell {err["cell"]}' if err.get('cell') is not None else ''
        why = f'  {err["ename"]}{cell}: {err["evalue"]}'
        why = why if len(why) <= 200 else why[:199] + '…'
    print(
        f'{_bar(done, total)} {entry["status"]:7} {entry["seconds"]:7.1f} s  '
        f'{entry["notebook"]}{why}',
        flush=True,
    )


def _how_run(entries: list[dict[str, Any]], jobs_at_once: int) -> None:
    """Fill ``ran``: alone, or beside which notebooks (from the measured start/end times)."""
    for e in entries:
        beside = [
            o['notebook']
            for o in entries
            if o is not e and o['start'] < e['end'] and e['start'] < o['end']
        ]
        e['beside'] = beside
        if e['measures_time']:
            e['ran'] = 'alone (measures time)'
        elif beside:
            e['ran'] = f'beside {len(beside)} other(s) (--jobs {jobs_at_once})'
        else:
            e['ran'] = f'alone (--jobs {jobs_at_once})'


def run_batch(
    jobs: list[Job], *, jobs_at_once: int, timeout: float, out: Path, inplace: bool
) -> list[dict[str, Any]]:
    """Run ``jobs``: the others ``jobs_at_once`` at a time, then those that measure time alone."""
    out = out.resolve()  # the workers run in each notebook's own folder
    log_dir = out / 'logs'
    log_dir.mkdir(parents=True, exist_ok=True)
    (out / 'results').mkdir(exist_ok=True)
    for job in jobs:
        rel = Path(job.name) if not Path(job.name).is_absolute() else Path(f'{job.key}.ipynb')
        job.output = (out / rel).resolve()
    lock, done, entries = threading.Lock(), [0], {}
    stop = threading.Event()
    kernel_dir = tempfile.TemporaryDirectory(prefix='d2l-kernel-')
    env = kernel_env(Path(kernel_dir.name))
    t0 = time.perf_counter()

    def work(job: Job) -> None:
        if stop.is_set():
            return
        with lock:
            print(
                f'{"":>{len(_bar(0, len(jobs))) + 1}}start   {job.name}'
                + (' (alone: measures time)' if job.exclusive else ''),
                flush=True,
            )
        entry = run_one(job, timeout, log_dir, t0, env)
        if stop.is_set() and entry['status'] != 'ok':
            entry.update(
                status='failed',
                error={'cell': None, 'ename': 'Interrupted', 'evalue': 'the batch was interrupted'},
            )
        if inplace:
            entry['refreshed'] = False
            if entry['status'] == 'ok' and not stop.is_set():
                current = hashlib.sha256(job.source.read_bytes()).hexdigest()
                if current != job.digest:
                    entry['note'] = 'not refreshed: the notebook changed while it ran'
                else:
                    try:
                        write_atomic(
                            refreshed(
                                nbformat.read(job.source, as_version=4),
                                nbformat.read(job.output, as_version=4),
                            ),
                            job.source,
                        )
                        entry['refreshed'] = True
                    except (OSError, ValueError) as err:
                        entry['note'] = f'not refreshed: {one_line(err)}'
        with lock:
            entries[job.name] = entry
            done[0] += 1
            _progress(done[0], len(jobs), entry)
            if entry.get('note'):
                print(f'{"":>{len(_bar(0, len(jobs))) + 1}}{entry["note"]}', flush=True)

    shared = [j for j in jobs if not j.exclusive]
    alone = [j for j in jobs if j.exclusive]
    print(
        f'{len(jobs)} notebook(s): {len(shared)} at most {jobs_at_once} at a time, then '
        f'{len(alone)} alone (they measure time); timeout {timeout:g} s each',
        flush=True,
    )
    pool = ThreadPoolExecutor(max_workers=jobs_at_once)
    try:
        list(pool.map(work, shared))
        pool.shutdown()
        for job in alone:
            work(job)
    except KeyboardInterrupt:
        stop.set()
        kill_all()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    finally:
        kernel_dir.cleanup()
    result = [entries[j.name] for j in jobs]
    _how_run(result, jobs_at_once)
    return result


# --- command line ---------------------------------------------------------------------------


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog='python -m d2lhelpers.batch',
        description=__doc__.split('\n\n')[0],
        epilog='\n\n'.join(__doc__.split('\n\n')[2:]),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument('paths', nargs='*', metavar='NOTEBOOK_OR_DIR')
    ap.add_argument(
        '-p',
        '--parameter',
        nargs=2,
        action='append',
        default=[],
        metavar=('NAME', 'VALUE'),
        help='a parameter (VALUE is YAML) for every notebook that declares NAME',
    )
    ap.add_argument('-f', '--parameters-file', metavar='FILE', help='YAML file of parameters')
    ap.add_argument(
        '--jobs',
        type=int,
        default=available_cores(),
        help='notebooks at a time (default: the number of cores)',
    )
    ap.add_argument('--out', default='build', help='output folder (default: build)')
    ap.add_argument(
        '--timeout',
        type=float,
        default=1800,
        help='seconds per notebook before its kernel is killed (default: 1800)',
    )
    ap.add_argument(
        '--inplace',
        action='store_true',
        help='rewrite the committed notebooks after a successful run',
    )
    ap.add_argument('--no-report', action='store_true', help='write summary.json only')
    return ap.parse_args(argv)


def _parameters(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    cli: dict[str, Any] = {}
    per_nb: dict[str, dict[str, Any]] = {}
    if args.parameters_file:
        try:
            data = yaml.safe_load(Path(args.parameters_file).read_text(encoding='utf-8')) or {}
        except (OSError, yaml.YAMLError) as err:
            raise UsageError(
                f'cannot read parameter file {args.parameters_file}: {one_line(err)}'
            ) from err
        if not isinstance(data, dict):
            raise UsageError(
                f'parameter file {args.parameters_file} must hold a mapping '
                f'(NAME: VALUE, and notebooks: {{NOTEBOOK: {{NAME: VALUE}}}})'
            )
        per_nb = data.pop('notebooks', None) or {}
        if not isinstance(per_nb, dict) or not all(isinstance(v, dict) for v in per_nb.values()):
            raise UsageError(
                '`notebooks:` in the parameter file must map notebooks to mappings of NAME: VALUE'
            )
        cli.update(data)
    for name, value in args.parameter:
        if not name.isidentifier():
            raise UsageError(f'-p {name}: not a parameter name')
        try:
            cli[name] = yaml.safe_load(value)
        except yaml.YAMLError as err:
            raise UsageError(
                f'-p {name}: cannot read {value!r} as YAML '
                f'({one_line(err)}); quote it, e.g. -p {name} "[64, 128]"'
            ) from err
    for where, params in [('', cli), *((f' (for {k})', v) for k, v in per_nb.items())]:
        for name, value in params.items():
            if name == 'results_path':
                raise UsageError('results_path is set by the runner (under --out); do not pass it')
            try:
                json.dumps(value)
            except (TypeError, ValueError):
                raise UsageError(
                    f'parameter `{name}`{where}: {value!r} is not a plain value '
                    '(number, string, list, mapping)'
                ) from None
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
            raise UsageError(
                '--inplace refreshes the stored outputs, which come from the default '
                'parameters: drop -p/-f'
            )
        out = Path(args.out).resolve()  # workers run in the notebook's own folder
        jobs = plan(collect(args.paths), cli, per_nb, out, inplace=args.inplace)
    except UsageError as err:
        print(f'error: {err}', file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    load_start = round(os.getloadavg()[0], 2)
    started = time.perf_counter()
    try:
        entries = run_batch(
            jobs, jobs_at_once=args.jobs, timeout=args.timeout, out=out, inplace=args.inplace
        )
    except KeyboardInterrupt:
        print('interrupted: every running notebook was killed', file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
    wall = time.perf_counter() - started
    from .report import environment, machine, write_report

    reported = [e.pop('environment') for e in entries if 'environment' in e]
    summary = {
        'wall_seconds': round(wall, 2),
        'jobs': args.jobs,
        'timeout': args.timeout,
        'inplace': args.inplace,
        'command': 'python -m d2lhelpers.batch '
        + shlex.join(argv if argv is not None else sys.argv[1:]),
        'load_average': {'start': load_start, 'end': round(os.getloadavg()[0], 2)},
        'machine': machine(),
        'environment': reported[0] if reported else None,
        'notebooks': entries,
    }
    summary_path = out / 'summary.json'
    _write_json(summary, summary_path)
    if not args.no_report:
        t = time.perf_counter()
        summary['environment'] = summary['environment'] or environment()
        report = write_report(summary, out)
        summary['report_seconds'] = round(time.perf_counter() - t, 2)
        _write_json(summary, summary_path)
        print(f'report: {_display(report)} ({summary["report_seconds"]:.1f} s)')
    bad = [e for e in entries if e['status'] != 'ok']
    print(
        f'{len(entries) - len(bad)}/{len(entries)} ok in {wall:.1f} s; '
        f'summary: {_display(summary_path)}'
    )
    for e in bad:
        err = e['error'] or {}
        cell = f' (cell {err["cell"]})' if err.get('cell') is not None else ''
        print(f'  {e["status"]}: {e["notebook"]}{cell}: {err.get("ename")}: {err.get("evalue")}')
    return 1 if bad else 0


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _write_json(data: dict[str, Any], path: Path) -> None:
    tmp = path.with_name(path.name + '.tmp')
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + '\n', encoding='utf-8')
    os.replace(tmp, path)


if __name__ == '__main__':
    sys.exit(main())
