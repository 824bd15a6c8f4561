"""Run notebooks in batch with papermill and write a summary and a report.

    python -m nbrun [NOTEBOOK_OR_DIR ...] [-p NAME VALUE ...] [--out DIR]
                    [--timeout SECONDS] [--inplace] [--no-report]

With no paths it runs ``notebooks/`` and ``exercises/``. Each notebook runs in its own process
(papermill, with the notebook's folder as working directory, as under nbval, and the kernel of
``nbrun.kernel``), one after the other. A notebook that fails or passes ``--timeout``
(its kernel and every process it started are killed, even one stuck in native code) does not
stop the others. An error in any cell fails its notebook.

``-p NAME VALUE`` (VALUE read as YAML: ``-p sizes "[64, 128]"``) goes to every notebook that
declares NAME in its ``parameters`` cell; a NAME that no notebook of the run declares is an
error. A notebook that declares ``results_path`` is given a file there; the JSON it saves
becomes the ``results`` of its summary entry.

``--inplace`` is the refresh command for the committed notebooks: each is rewritten (its
committed cells with the new outputs, see ``nbrun.notebook.refreshed``) only after a
successful run, atomically; a failed run leaves it byte for byte untouched, and so does a
notebook edited while it ran. Parameters are refused with ``--inplace``: stored outputs come
from the defaults (so ``results_path`` is not given either).

Ctrl-C (SIGINT) or SIGTERM stops the batch: the running notebooks and everything they started
are killed, and the summary says which were ``interrupted`` and which were ``not run``; a second
Ctrl-C changes nothing (the summary is still written). Exit status: 0 if every notebook ended
``ok``, 1 if one did not (or the runner itself failed: a traceback, the summary is written
first), 2 for a bad command line (nothing is run), 130 after SIGINT, 143 after SIGTERM.
(Ctrl-C at a moment when no handler is set, or an exception of the runner, is raised again
after the summary is written.)

Writes ``OUT/summary.json`` (in every ending), the executed notebooks under ``OUT/`` (their
paths kept, folders included), one log per notebook under ``OUT/logs/``, and, after a batch
that was not stopped, ``OUT/report.md`` with its figures under ``OUT/figures/``
(see ``nbrun.report``).
"""

from __future__ import annotations

import argparse
import math
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
import traceback
from datetime import datetime
from pathlib import Path
from typing import Any

from .plan import UsageError, collect, plan, read_parameters
from .run import Batch
from .summary import environment, load_average, machine, make_summary, write_summary

__all__ = ['main']


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(
            f'must be a finite number of seconds greater than 0, got {text!r}'
        )
    return value


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    doc = __doc__ or ''
    ap = argparse.ArgumentParser(
        prog='python -m nbrun',
        description=doc.split('\n\n')[0],
        epilog='\n\n'.join(doc.split('\n\n')[2:]),
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
    ap.add_argument('--out', default='build', help='output folder (default: build)')
    ap.add_argument(
        '--timeout',
        type=_seconds,
        default=1800.0,
        help='seconds per notebook before its kernel is killed (default: 1800)',
    )
    ap.add_argument(
        '--inplace',
        action='store_true',
        help='rewrite the committed notebooks after a successful run',
    )
    ap.add_argument('--no-report', action='store_true', help='write summary.json only')
    return ap.parse_args(argv)


class _Signals:
    """SIGINT and SIGTERM, from ``with`` until its end: the first one stops the batch.

    While the batch runs the handler only asks it to stop (the main loop then kills and
    summarises, and nothing can interrupt that); a second signal is ignored. With
    ``raising = True`` (while the report is written) the first one raises KeyboardInterrupt.
    Handlers can only be set in the main thread; elsewhere this does nothing.
    """

    def __init__(self, batch: Batch) -> None:
        self.batch = batch
        self.received: int | None = None
        self.raising = False
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> _Signals:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def _handle(self, signum: int, frame: object) -> None:
        name = signal.Signals(signum).name
        if self.received is not None:
            os.write(2, f'\n{name}: already stopping\n'.encode())
            return
        self.received = signum
        self.batch.request_stop(name)
        if self.raising:
            raise KeyboardInterrupt(name)
        os.write(2, f'\n{name}: stopping; killing the running notebooks\n'.encode())


def _display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    try:
        common = read_parameters(args.parameter)
        if args.inplace and common:
            raise UsageError(
                '--inplace refreshes the stored outputs, which come from the default '
                'parameters: drop -p'
            )
        jobs = plan(collect(args.paths), common, inplace=args.inplace)
    except UsageError as err:
        print(f'error: {err}', file=sys.stderr)
        return 2
    out = Path(args.out).resolve()
    batch = Batch(jobs, out=out, timeout=args.timeout, inplace=args.inplace)
    run_info: dict[str, Any] = {
        'command': 'python -m nbrun ' + shlex.join(argv if argv is not None else sys.argv[1:]),
        'commit': _commit(jobs[0].source.parent),
        'timeout': args.timeout,
        'inplace': args.inplace,
        'started': datetime.now().astimezone().isoformat(timespec='seconds'),
    }
    load_start = load_average()
    started = time.perf_counter()
    with _Signals(batch) as signals:
        crash: BaseException | None = None
        try:
            batch.run()
        except BaseException as err:  # raised again once the summary says how the batch ended
            crash = err
        ending = _ending(batch, crash)
        summary = make_summary(
            batch.entries(),
            **run_info,
            ending=ending,
            runner_error=_runner_error(crash),
            wall_seconds=round(time.perf_counter() - started, 2),
            load_average={'start': load_start, 'end': load_average()},
            machine=machine(),
        )
        summary_path = write_summary(summary, out)
        if ending != 'finished':
            counts = ', '.join(f'{n} {s}' for s, n in summary['counts'].items())
            print(
                f'stopped ({ending}): {counts}; every notebook process was killed; '
                f'summary: {_display(summary_path)}',
                file=sys.stderr,
                flush=True,
            )
        if crash is not None:
            raise crash
        if signals.received is not None:
            return 128 + signals.received
        if not args.no_report:
            signals.raising = True
            try:
                _report(summary, out)
            except KeyboardInterrupt:
                print('report not written (interrupted)', file=sys.stderr)
                return 128 + (signals.received or signal.SIGINT)
    entries = batch.entries()
    bad = [e for e in entries if e.status != 'ok']
    print(
        f'{len(entries) - len(bad)}/{len(entries)} ok in {summary["wall_seconds"]:.1f} s; '
        f'summary: {_display(summary_path)}'
    )
    for e in bad:
        print(f'  {e.status}: {e.notebook}' + (f': {e.error}' if e.error else ''))
    return 1 if bad else 0


def _ending(batch: Batch, crash: BaseException | None) -> str:
    """How the batch ended, for the summary: what stopped it (a signal, ``runner error``), else
    ``finished`` if ``batch.run()`` returned, else what it raised (a bare Ctrl-C, or an error
    before the batch could record it)."""
    if batch.stop_reason is not None:
        return batch.stop_reason
    if crash is None:
        return 'finished'
    if isinstance(crash, KeyboardInterrupt):
        return 'SIGINT'
    return 'runner error'


def _runner_error(crash: BaseException | None) -> str | None:
    """The traceback of the runner's own failure (None after a normal end or a Ctrl-C)."""
    if crash is None or isinstance(crash, KeyboardInterrupt):
        return None
    return ''.join(traceback.format_exception(crash))


def _report(summary: dict[str, Any], out: Path) -> None:
    """Write the report; the summary gets the environment first (it imports TensorFlow)."""
    from .report import write_report

    t = time.perf_counter()
    if not summary.get('environment'):
        summary['environment'] = environment()
    md = write_report(summary, out)
    summary['report_seconds'] = round(time.perf_counter() - t, 2)
    write_summary(summary, out)
    print(f'report: {_display(md)} ({summary["report_seconds"]:.1f} s)')


def _commit(folder: Path) -> str | None:
    """The short commit of the repository holding ``folder``; outside git (a staged copy without
    ``.git``) the ``D2L_COMMIT`` its stager set, else None."""
    fallback = os.environ.get('D2L_COMMIT') or None
    try:
        out = subprocess.run(
            ['git', 'rev-parse', '--short', 'HEAD'],
            capture_output=True,
            text=True,
            timeout=10,
            cwd=folder,
        )
    except (OSError, subprocess.SubprocessError):
        return fallback
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else fallback
