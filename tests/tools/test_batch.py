"""The batch runner (``python -m nbrun``) on the tiny notebooks of ``tests/tools/nb/``.

Endings that stop a batch (signals, an exception in the runner) are in test_batch_endings.py,
the report in test_report.py. Helpers: tests/tools/batch_support.py.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import stat
import subprocess
from pathlib import Path

import nbformat
import pytest
from batch_support import NB, batch, copy, entries, summary, survivors
from nbrun import cli
from nbrun.notebook import canonical, declared_parameters, refreshed
from nbrun.processes import alive
from nbrun.summary import Entry

FIELDS = [f.name for f in dataclasses.fields(Entry)]
ROOT = Path(__file__).resolve().parents[2]
COLLECTION = sorted([*ROOT.glob('notebooks/*.ipynb'), *ROOT.glob('exercises/*.ipynb')])


def meeting(path: Path, me: str, partner: str) -> None:
    """``meet.ipynb`` at ``path``, its parameters cell saying who it is and whom it waits for."""
    nb = nbformat.read(NB / 'meet.ipynb', as_version=4)
    cell = next(c for c in nb.cells if c.get('id') == 'parameters')
    cell.source = f'me = {me!r}\npartner = {partner!r}\nwait_s = 60'
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)


def test_one_batch_with_every_kind_of_notebook(tmp_path):
    """A notebook that raises, one given a bad parameter by -p, two that wait for each other
    (so they fail if run one after the other), three that succeed (one in a subfolder; names
    that would meet if paths were flattened); each -p goes only to the notebooks that declare
    it: one batch, a failure stops nothing, nothing is left running, every file in its own
    place."""
    copy(tmp_path, 'raises', 'ok', 'timed')
    meeting(tmp_path / 'meet.ipynb', 'x', 'y')  # y comes after it: never met
    meeting(tmp_path / 'later.ipynb', 'y', 'x')  # x came before it: met at once
    meeting(tmp_path / 'sub' / 'meet.ipynb', 'a', 'a')  # meets itself
    meeting(tmp_path / 'sub__meet.ipynb', 'a', 'a')
    names = ['raises.ipynb', 'ok.ipynb', 'meet.ipynb', 'timed.ipynb']
    names += ['later.ipynb', 'sub/meet.ipynb', 'sub__meet.ipynb']
    run = batch(
        tmp_path,
        *names,
        *('-p', 'sizes', '[-1]', '-p', 'wait_s', '1'),
        *('--out', 'build/x', '--no-report'),
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert survivors(tmp_path) == []
    out = tmp_path / 'build' / 'x'
    top = summary(out)
    assert top['ending'] == 'finished' and top['runner_error'] is None
    assert top['counts'] == {'failed': 3, 'ok': 4}
    assert top['timeout'] == 1800.0 and 'jobs' not in top
    assert top['commit'] is None  # tmp_path is in no git repository (the runner is)
    assert top['environment'] is None  # --no-report: no TensorFlow imported for it
    got = entries(out)
    assert list(got) == names
    assert all(list(e) == FIELDS for e in got.values())

    raised = got['raises.ipynb']
    assert raised['status'] == 'failed'
    assert raised['error'] == {
        'cell': 2,
        'cell_id': 'boom',
        'ename': 'RuntimeError',
        'evalue': 'hỏng ở đây',
    }
    executed = nbformat.read(out / 'raises.ipynb', as_version=4)
    boom = next(c for c in executed.cells if c.get('id') == 'boom')
    assert boom.outputs[0]['ename'] == 'RuntimeError'

    bad = got['ok.ipynb']
    assert bad['status'] == 'failed' and bad['parameters'] == {'sizes': [-1]}
    assert bad['error']['cell'] == 2 and bad['error']['ename'] == 'ValueError'
    assert '`sizes`' in bad['error']['evalue'] and '\n' not in bad['error']['evalue']

    first, later = got['meet.ipynb'], got['later.ipynb']  # one after the other
    assert first['status'] == 'failed' and first['error']['ename'] == 'TimeoutError'
    assert first['parameters'] == {'wait_s': 1}
    assert later['status'] == 'ok'
    for name in ('sub/meet.ipynb', 'sub__meet.ipynb'):
        met = got[name]
        assert met['status'] == 'ok' and met['error'] is None, name
        assert met['parameters'] == {'wait_s': 1} and met['results'] is None
        assert met['output'] == name and met['log'] == f'logs/{name[:-6]}.log'
        assert met['refreshed'] is None and met['headline'] is None
    assert (tmp_path / 'sub' / 'a.here').exists()  # it ran in its own folder

    assert got['timed.ipynb']['status'] == 'ok'
    times = json.loads((tmp_path / 'timed.times.json').read_text())
    assert times['cwd'] == str(tmp_path)  # a notebook runs in its own folder

    # under --out: the executed notebooks, their logs, the summary
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob('*') if p.is_file())
    assert files == sorted(['summary.json', *names, *(f'logs/{n[:-6]}.log' for n in names)])
    assert not (tmp_path / 'sub' / 'build').exists()
    # the progress: one line per notebook with the overall bar, the failures named at the end
    assert '7/7' in run.stdout and '[####################]' in run.stdout
    assert 'failed: ok.ipynb: ValueError (ô 2): tham số `sizes`' in run.stdout


def test_timeout_kills_a_kernel_stuck_in_native_code(tmp_path):
    """Its kernel blocks in C (no Python signal handler runs) after starting a child process.
    The notebook is committed in a git repository: the summary names that commit."""
    copy(tmp_path, 'hang')
    git = ['git', '-C', str(tmp_path), '-c', 'user.name=t', '-c', 'user.email=t@t']
    subprocess.run([*git, 'init', '-q'], check=True)
    subprocess.run([*git, 'add', 'hang.ipynb'], check=True)
    subprocess.run([*git, 'commit', '-q', '-m', 'x'], check=True)
    head = subprocess.run(
        [*git, 'rev-parse', '--short', 'HEAD'], capture_output=True, text=True, check=True
    ).stdout.strip()
    stale = tmp_path / 'out' / 'hang.ipynb'  # from an earlier run: this one writes none
    stale.parent.mkdir()
    stale.write_text('{}')
    run = batch(tmp_path, 'hang.ipynb', '--timeout', '5', '--out', 'out', '--no-report')
    assert run.returncode == 1, run.stdout + run.stderr
    assert survivors(tmp_path) == []
    assert summary(tmp_path / 'out')['commit'] == head
    hang = entries(tmp_path / 'out')['hang.ipynb']
    assert hang['status'] == 'timeout' and hang['output'] is None and not stale.exists()
    assert hang['error']['ename'] == 'Timeout'
    assert hang['error']['evalue'] == 'killed after 5 s (--timeout)'
    assert hang['seconds'] >= 5
    marker = tmp_path / 'hang.here'
    if marker.exists():  # the kernel got that far within 5 s (it nearly always does)
        pids = json.loads(marker.read_text())
        assert hang['error']['cell_id'] in ('record-pids', 'native-hang')
        assert not alive(pids['kernel']), 'the kernel survived the timeout'
        assert not alive(pids['child']), 'a process the notebook started survived'
    assert 'timeout: hang.ipynb' in run.stdout


def test_inplace_refreshes_only_notebooks_that_ran_and_did_not_change(tmp_path):
    copy(tmp_path, 'ok', 'raises', 'selfedit')
    (tmp_path / 'ok.ipynb').chmod(0o640)
    before = (tmp_path / 'raises.ipynb').read_bytes()
    source = nbformat.read(tmp_path / 'ok.ipynb', as_version=4)
    run = batch(tmp_path, '.', '--inplace', '--out', 'out', '--no-report')
    assert run.returncode == 1, run.stdout + run.stderr
    assert (tmp_path / 'raises.ipynb').read_bytes() == before  # untouched, byte for byte
    got = entries(tmp_path / 'out')
    assert got['ok.ipynb']['status'] == 'ok'
    assert got['ok.ipynb']['refreshed'] is True and got['raises.ipynb']['refreshed'] is False
    edited = got['selfedit.ipynb']  # it appends to its own file while it runs
    assert edited['status'] == 'ok' and edited['refreshed'] is False
    assert edited['note'] == 'not refreshed: the notebook changed while it ran'
    assert 'not refreshed: the notebook changed while it ran' in run.stdout
    text = (tmp_path / 'ok.ipynb').read_text(encoding='utf-8')
    nb = nbformat.reads(text, as_version=4)
    nbformat.validate(nb)
    assert 'papermill' not in text and '"execution"' not in text
    assert 'injected-parameters' not in text and 'results_path = "' not in text
    assert nb.metadata == source.metadata  # kernelspec and the rest kept
    assert [c.id for c in nb.cells] == [c.id for c in source.cells]
    assert [c.get('metadata') for c in nb.cells] == [c.get('metadata') for c in source.cells]
    counts = [c.execution_count for c in nb.cells if c.cell_type == 'code']
    assert counts == list(range(1, len(counts) + 1))
    assert nb.cells[3].outputs[0]['data']['text/plain'] == '[2, 4, 6]'
    assert canonical(nb) == nb and text.endswith('\n')
    assert stat.S_IMODE((tmp_path / 'ok.ipynb').stat().st_mode) == 0o640
    assert not list(tmp_path.glob('.*.tmp'))


# --- the command line, without running anything -------------------------------------------------


def usage(capsys, *args: str) -> tuple[int, str]:
    """``main(args)``: its exit status and what it wrote to stderr."""
    try:
        code = cli.main(list(args))
    except SystemExit as exit:  # argparse
        code = exit.code
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    'args, message',
    [
        (['-p', 'sizez', '[1]'], 'no notebook of this run declares the parameter(s) `sizez`'),
        (['-p', 'sizes', '[1,'], "-p sizes: cannot read '[1,' as YAML"),
        (['-p', 'results_path', 'x'], 'results_path is set by the runner'),
        (['-p', 'sizes', '.nan'], 'is not a plain value'),
        (['--timeout', 'nan'], 'argument --timeout: must be a finite number of seconds greater'),
        (['--timeout', 'inf'], "greater than 0, got 'inf'"),
        (['--timeout', '0'], "greater than 0, got '0'"),
        (['--timeout', '-1'], "greater than 0, got '-1'"),
        (['--timeout', 'soon'], "greater than 0, got 'soon'"),
        (['--inplace', '-p', 'scale', '3'], '--inplace refreshes the stored outputs'),
        (['nothing.ipynb'], 'not a notebook or a folder: nothing.ipynb'),
    ],
)
def test_bad_command_line_runs_nothing(tmp_path, monkeypatch, capsys, args, message):
    copy(tmp_path, 'ok')
    monkeypatch.chdir(tmp_path)
    paths = [] if any(a.endswith('.ipynb') for a in args) else ['ok.ipynb']
    code, err = usage(capsys, *paths, *args, '--out', 'out')
    assert code == 2 and message in err, err
    assert not (tmp_path / 'out').exists()


def test_a_notebook_outside_the_current_folder_is_refused(tmp_path, monkeypatch, capsys):
    """Its files under --out would have no relative path to keep."""
    copy(tmp_path, 'ok')
    (tmp_path / 'here').mkdir()
    monkeypatch.chdir(tmp_path / 'here')
    code, err = usage(capsys, '../ok.ipynb', '--out', 'out')
    assert code == 2 and f'{(tmp_path / "ok.ipynb").resolve()} is not below the' in err, err
    assert not (tmp_path / 'here' / 'out').exists()


# --- the notebook helpers ------------------------------------------------------------------------


def test_notebook_helpers():
    nb = nbformat.read(NB / 'ok.ipynb', as_version=4)
    assert declared_parameters(nb) == {'sizes': [1, 2, 3], 'scale': 2, 'results_path': None}
    assert canonical(nb) == nb  # the test notebooks are canonical
    odd = nbformat.from_dict(json.loads(json.dumps(nb)))
    odd.cells[1].source = 'n = 2  # at least 2 (n >= 2)\nname = "x"\nk = 2 ** 3'
    assert declared_parameters(odd) == {'name': 'x', 'k': '2 ** 3'}  # as papermill reads it
    assert assigned(odd.cells[1]) - set(declared_parameters(odd)) == {
        'n'
    }  # what the next test finds

    executed = nbformat.from_dict(json.loads(json.dumps(nb)))
    executed.metadata['papermill'] = {'duration': 1.0}
    executed.metadata['language_info'] = {'name': 'python', 'version': '3.11.2'}
    injected = nbformat.v4.new_code_cell('sizes = [1]', id='x')
    injected.metadata['tags'] = ['injected-parameters']
    executed.cells.insert(2, injected)
    for i, cell in enumerate(c for c in executed.cells if c.cell_type == 'code'):
        cell.execution_count = i + 7
        cell.metadata['papermill'] = {'duration': 0.1}
        cell.metadata['execution'] = {'iopub.status.busy': 'now'}
    fresh = refreshed(nb, executed)
    assert fresh.metadata == nb.metadata and len(fresh.cells) == len(nb.cells)
    assert [c.execution_count for c in fresh.cells if c.cell_type == 'code'] == [1, 2, 3, 4]
    assert all('papermill' not in c.metadata and 'execution' not in c.metadata for c in fresh.cells)
    assert canonical(fresh) == fresh
    executed.cells[3].source = 'changed'
    with pytest.raises(ValueError, match='does not have the cells'):
        refreshed(nb, executed)


def assigned(cell: nbformat.NotebookNode) -> set[str]:
    """The names a code cell assigns at its top level, as Python reads them."""
    return {
        target.id
        for node in ast.parse(cell.source).body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
    }


@pytest.mark.parametrize('path', COLLECTION, ids=lambda p: p.name)
def test_papermill_reads_every_parameter_a_notebook_assigns(path):
    """papermill skips a line with more than one ``=`` (``n = 2  # (n >= 2)``): the name is still
    assigned for Python, but papermill does not declare it, so ``-p n 4`` is refused (the
    ``odd`` cell of test_notebook_helpers is such a line). CONTRIBUTING: no ``=`` in a comment of
    the parameters cell."""
    nb = nbformat.read(path, as_version=4)
    (cell,) = [c for c in nb.cells if 'parameters' in c.metadata.get('tags', [])]
    assert assigned(cell) == set(declared_parameters(nb)), path.name


def test_a_copy_without_git_takes_the_commit_its_stager_set(tmp_path, monkeypatch):
    from nbrun import cli

    monkeypatch.setenv('GIT_CEILING_DIRECTORIES', str(tmp_path.parent))
    monkeypatch.delenv('D2L_COMMIT', raising=False)
    assert cli._commit(tmp_path) is None
    monkeypatch.setenv('D2L_COMMIT', 'abc1234')
    assert cli._commit(tmp_path) == 'abc1234'
