"""The batch runner (``python -m d2lhelpers.batch``) on the tiny notebooks of ``tests/nb/``.

Each test copies the notebooks it needs into a temporary folder and runs the runner there as a
user would (a subprocess), so nothing under ``tests/nb/`` changes. The notebooks import nothing
heavy (no TensorFlow): a run costs a kernel start, ~2-3 s.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from d2lhelpers.batch import alive, plan, run_batch
from d2lhelpers.notebook import canonical, declared_parameters, first_error, refreshed
from d2lhelpers.report import write_report

NB = Path(__file__).parent / 'nb'
VENV_JUPYTER = Path(sys.prefix) / 'share' / 'jupyter'


def copy(tmp: Path, *names: str) -> None:
    for name in names:
        shutil.copy(NB / f'{name}.ipynb', tmp / f'{name}.ipynb')


def batch(
    tmp: Path, *args: str, jupyter_path: str | None = None, timeout: float = 240
) -> subprocess.CompletedProcess:
    """Run the runner in ``tmp``; ``jupyter_path`` None: without JUPYTER_PATH, else set to it."""
    env = {k: v for k, v in os.environ.items() if k != 'JUPYTER_PATH'}
    if jupyter_path is not None:
        env['JUPYTER_PATH'] = jupyter_path
    return subprocess.run(
        [sys.executable, '-m', 'd2lhelpers.batch', *args, '--no-report'],
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def entries(tmp: Path, out: str = 'out') -> dict[str, dict]:
    summary = json.loads((tmp / out / 'summary.json').read_text(encoding='utf-8'))
    return {e['notebook']: e for e in summary['notebooks']}


def test_failures_do_not_stop_the_others(tmp_path):
    """A notebook that raises, one whose parameter is bad, one that is fine: one batch."""
    copy(tmp_path, 'raises', 'ok', 'sleep-a')
    (tmp_path / 'params.yaml').write_text('notebooks:\n  sleep-a: {seconds: 0}\n')
    run = batch(
        tmp_path,
        'raises.ipynb',
        'ok.ipynb',
        'sleep-a.ipynb',
        '-p',
        'sizes',
        '[-1]',
        '-f',
        'params.yaml',
        '--jobs',
        '2',
        '--out',
        'out',
        jupyter_path=str(VENV_JUPYTER),
    )
    assert run.returncode == 1, run.stdout + run.stderr
    got = entries(tmp_path)
    raised = got['raises.ipynb']
    assert raised['status'] == 'failed'
    assert raised['error'] == {
        'cell': 2,
        'cell_id': 'boom',
        'execution_count': 2,
        'ename': 'RuntimeError',
        'evalue': 'hỏng ở đây',
    }
    bad = got['ok.ipynb']
    assert bad['status'] == 'failed' and bad['parameters'] == {'sizes': [-1]}
    assert bad['error']['cell'] == 2 and bad['error']['ename'] == 'ValueError'
    assert '`sizes`' in bad['error']['evalue'] and '\n' not in bad['error']['evalue']
    fine = got['sleep-a.ipynb']
    assert fine['status'] == 'ok' and fine['error'] is None and fine['parameters'] == {'seconds': 0}
    assert set(fine) >= {'notebook', 'status', 'seconds', 'error', 'parameters', 'results'}
    # the executed notebooks are there, with the error stored in the failing one
    executed = nbformat.read(tmp_path / 'out' / 'raises.ipynb', as_version=4)
    assert first_error(executed)['cell_id'] == 'boom'
    # the progress: one line per notebook with the overall bar, and the failures named at the end
    assert '3/3' in run.stdout and '[####################]' in run.stdout
    assert 'failed: ok.ipynb (cell 2): ValueError: tham số `sizes`' in run.stdout


def test_results_are_collected(tmp_path):
    copy(tmp_path, 'ok')
    run = batch(tmp_path, 'ok.ipynb', '--out', 'out')
    assert run.returncode == 0, run.stdout + run.stderr
    entry = entries(tmp_path)['ok.ipynb']
    assert entry['status'] == 'ok'
    assert entry['results'] == {'values': [2, 4, 6]}  # the teaching error of cell 4 is allowed
    assert entry['parameters'] == {}  # results_path is the runner's business
    assert 0 < entry['kernel_seconds'] <= entry['seconds']


def test_timeout_kills_a_kernel_stuck_in_native_code(tmp_path):
    copy(tmp_path, 'hang')
    run = batch(tmp_path, 'hang.ipynb', '--timeout', '20', '--out', 'out')
    assert run.returncode == 1, run.stdout + run.stderr
    entry = entries(tmp_path)['hang.ipynb']
    assert entry['status'] == 'timeout'
    assert entry['error']['ename'] == 'Timeout' and '20 s' in entry['error']['evalue']
    assert entry['error']['cell'] == 2 and entry['error']['cell_id'] == 'native-hang'
    assert 19 <= entry['seconds'] < 35
    kernel, child = map(int, (tmp_path / 'hang.pids').read_text().split())
    assert kernel != child
    assert not alive(kernel), 'the kernel survived the timeout'
    assert not alive(child), 'a process started by the kernel survived the timeout'


def test_jobs_in_parallel_but_never_beside_a_timing_notebook(tmp_path):
    copy(tmp_path, 'sleep-a', 'sleep-b', 'timed')
    run = batch(tmp_path, '.', '--jobs', '2', '--out', 'out')
    assert run.returncode == 0, run.stdout + run.stderr
    times = {
        n: json.loads((tmp_path / f'{n}.times.json').read_text())
        for n in ('sleep-a', 'sleep-b', 'timed')
    }

    def overlap(a, b):
        return times[a]['start'] < times[b]['end'] and times[b]['start'] < times[a]['end']

    assert overlap('sleep-a', 'sleep-b'), times
    assert not overlap('timed', 'sleep-a') and not overlap('timed', 'sleep-b'), times
    assert all(t['cwd'] == str(tmp_path) for t in times.values())  # the notebook's folder
    got = entries(tmp_path)
    assert got['timed.ipynb']['ran'] == 'alone (measures time)'
    assert got['timed.ipynb']['beside'] == []
    assert got['sleep-a.ipynb']['beside'] == ['sleep-b.ipynb']
    assert got['sleep-a.ipynb']['ran'].startswith('beside 1 other')


def test_inplace_refreshes_only_successful_notebooks(tmp_path):
    copy(tmp_path, 'ok', 'raises')
    (tmp_path / 'ok.ipynb').chmod(0o640)
    before = (tmp_path / 'raises.ipynb').read_bytes()
    source = nbformat.read(tmp_path / 'ok.ipynb', as_version=4)
    run = batch(
        tmp_path,
        'ok.ipynb',
        'raises.ipynb',
        '--inplace',
        '--out',
        'out',
        jupyter_path=str(VENV_JUPYTER),
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert (tmp_path / 'raises.ipynb').read_bytes() == before  # untouched, byte for byte
    got = entries(tmp_path)
    assert got['ok.ipynb']['refreshed'] is True and got['raises.ipynb']['refreshed'] is False
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
    assert nb.cells[4].outputs[0]['ename'] == 'ZeroDivisionError'  # the error it teaches
    assert canonical(nb) == nb and text.endswith('\n')
    assert stat.S_IMODE((tmp_path / 'ok.ipynb').stat().st_mode) == 0o640
    assert not list(tmp_path.glob('.*.tmp'))


def test_inplace_leaves_a_notebook_edited_during_the_run(tmp_path, monkeypatch, capsys):
    copy(tmp_path, 'timed')
    monkeypatch.chdir(tmp_path)
    path = tmp_path / 'timed.ipynb'
    jobs = plan([path], {}, {}, tmp_path / 'out', inplace=True)
    path.write_text(
        path.read_text(encoding='utf-8').replace('seconds = 1', 'seconds = 0'), encoding='utf-8'
    )  # someone edits it meanwhile
    edited = path.read_bytes()
    [entry] = run_batch(jobs, jobs_at_once=1, timeout=120, out=tmp_path / 'out', inplace=True)
    assert entry['status'] == 'ok' and entry['refreshed'] is False
    assert (
        'changed while it ran' in entry['note']
        and 'changed while it ran' in capsys.readouterr().out
    )
    assert path.read_bytes() == edited


def test_inplace_refuses_parameters(tmp_path):
    copy(tmp_path, 'ok')
    run = batch(tmp_path, 'ok.ipynb', '--inplace', '-p', 'scale', '3')
    assert run.returncode == 2 and '--inplace' in run.stderr


@pytest.mark.parametrize(
    'args, message',
    [
        (['-p', 'sizez', '[1]'], 'no notebook of this run declares the parameter(s) `sizez`'),
        (['-p', 'sizes', '[1,'], "-p sizes: cannot read '[1,' as YAML"),
        (['-p', 'results_path', 'x'], 'results_path is set by the runner'),
        (['-f', 'missing.yaml'], 'cannot read parameter file missing.yaml'),
        (['--jobs', '0'], '--jobs must be >= 1'),
        (['nothing.ipynb'], 'not a notebook or a folder: nothing.ipynb'),
    ],
)
def test_bad_command_line_runs_nothing(tmp_path, args, message):
    copy(tmp_path, 'ok')
    paths = [] if any(a.endswith('.ipynb') for a in args) else ['ok.ipynb']
    run = batch(tmp_path, *paths, *args, '--out', 'out')
    assert run.returncode == 2, run.stdout + run.stderr
    assert message in run.stderr
    assert not (tmp_path / 'out').exists()


def test_parameter_file_for_one_notebook_must_be_declared(tmp_path):
    copy(tmp_path, 'ok', 'sleep-a')
    (tmp_path / 'p.yaml').write_text('notebooks:\n  ok.ipynb: {seconds: 1}\n')
    run = batch(tmp_path, '.', '-f', 'p.yaml', '--out', 'out')
    assert run.returncode == 2
    assert 'ok.ipynb does not declare a parameter `seconds`' in run.stderr
    (tmp_path / 'p.yaml').write_text('- a list\n')
    run = batch(tmp_path, '.', '-f', 'p.yaml', '--out', 'out')
    assert run.returncode == 2 and 'must hold a mapping' in run.stderr


# --- the notebook helpers ---------------------------------------------------------------------


def test_notebook_helpers():
    nb = nbformat.read(NB / 'ok.ipynb', as_version=4)
    assert declared_parameters(nb) == {'sizes': [1, 2, 3], 'scale': 2, 'results_path': None}
    assert canonical(nb) == nb  # the test notebooks are canonical
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
    executed.cells[5].outputs = [
        nbformat.v4.new_output(
            'error', ename='ZeroDivisionError', evalue='division by zero', traceback=[]
        )
    ]
    assert first_error(executed) is None  # cell 4 teaches that error
    executed.cells[4].outputs = [
        nbformat.v4.new_output(
            'error', ename='ValueError', evalue='\x1b[31mline one\nline two', traceback=[]
        )
    ]
    assert first_error(executed) == {
        'cell': 3,
        'cell_id': 'compute',
        'execution_count': 10,
        'ename': 'ValueError',
        'evalue': 'line one',
    }
    fresh = refreshed(nb, executed)
    assert fresh.metadata == nb.metadata and len(fresh.cells) == len(nb.cells)
    assert [c.execution_count for c in fresh.cells if c.cell_type == 'code'] == [1, 2, 3, 4, 5]
    assert all('papermill' not in c.metadata and 'execution' not in c.metadata for c in fresh.cells)
    assert canonical(fresh) == fresh


# --- the report -------------------------------------------------------------------------------

FAKE_RESULTS = {
    'exercises/01-cpu-vs-gpu-matmul.ipynb': {
        'sizes': [64, 256, 1024],
        'devices': ['/CPU:0', 'numpy'],
        'median_s': {
            '/CPU:0': {'64': 2e-5, '256': 3e-4, '1024': 0.011},
            'numpy': {'64': 1e-5, '256': 2.5e-4, '1024': 0.012},
        },
        'gflops': {
            '/CPU:0': {'64': 26.2, '256': 111.8, '1024': 195.2},
            'numpy': {'64': 52.4, '256': 134.2, '1024': 179.0},
        },
        'crossover_n': 1024,
    },
    'exercises/03-log-on-device.ipynb': {
        'median_s': {
            'no_logging': 0.021,
            'host_every_step': 0.396,
            'device_once': 0.239,
            'tf_function': 0.027,
        },
        'slowdown_vs_no_logging': {
            'no_logging': 1.0,
            'host_every_step': 18.9,
            'device_once': 11.4,
            'tf_function': 1.29,
        },
    },
    'exercises/04-two-gpu-matmul.ipynb': {
        'median_s': {'sequential': 0.52, 'concurrent': 0.28},
        'speedup': 1.86,
        'ideal': 2.0,
    },
    'notebooks/choose-a-gpu.ipynb': {
        'bandwidth_gbs': {'/CPU:0': 12.1},
        'gflops': {'/CPU:0': {'256': 110.0, '1024': 190.0, '2048': 205.0}},
        'dtype_gflops': {'/CPU:0': {'float32': 190.0, 'float16': 12.0, 'bfloat16': 45.0}},
    },
    'notebooks/data-parallel.ipynb': {
        'losses': {
            'single': [2.3, 1.2, 0.8, 0.6],
            'mirrored_fit': [2.3, 1.2, 0.8, 0.6],
            'custom_loop': [2.3, 1.21, 0.81, 0.6],
        },
        'max_abs_weight_diff': {'mirrored_fit': 1e-7, 'custom_loop': 3e-7},
        'workers_equal': True,
        'step_time_s': {'1': 0.012, '2': 0.009},
    },
    'exercises/05-other.ipynb': {'answer': 42, 'nested': {'ratio': 1.5}},
}


def test_report_from_a_fake_summary(tmp_path):
    notebooks = [
        {
            'notebook': name,
            'status': 'ok',
            'seconds': 12.3,
            'error': None,
            'parameters': {},
            'results': results,
            'measures_time': True,
            'ran': 'alone (measures time)',
            'beside': [],
        }
        for name, results in FAKE_RESULTS.items()
    ]
    notebooks.append(
        {
            'notebook': 'exercises/02-broken.ipynb',
            'status': 'failed',
            'seconds': 3.0,
            'error': {
                'cell': 3,
                'ename': 'ValueError',
                'evalue': 'tham số `sizes` chỉ nhận số nguyên dương | x',
            },
            'parameters': {'sizes': [-1]},
            'results': None,
            'measures_time': False,
            'ran': 'beside 1 other(s) (--jobs 2)',
            'beside': ['a.ipynb'],
        }
    )
    summary = {
        'wall_seconds': 80.5,
        'jobs': 2,
        'inplace': False,
        'notebooks': notebooks,
        'load_average': {'start': 0.1, 'end': 1.9},
        'machine': {'platform': 'Linux', 'python': '3.11', 'cores': 2},
    }
    env = {
        'tensorflow': '2.21.0',
        'keras': '3.15.1',
        'numpy': '2.4.6',
        'built_with_cuda': False,
        'cuda': None,
        'cudnn': None,
        'physical': ['/CPU:0'],
        'logical': ['/CPU:0'],
        'gpus': [],
    }
    path = write_report(summary, tmp_path, env=env)
    text = path.read_text(encoding='utf-8')
    pngs = sorted(p.name for p in tmp_path.glob('*.png'))
    assert len(pngs) == 5
    for png in pngs:
        assert f']({png})' in text
        assert (tmp_path / png).read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
    assert 'TensorFlow 2.21.0' in text and 'không có GPU' in text
    assert '| exercises/02-broken.ipynb | failed | 3.0 s |' in text
    assert 'tham số `sizes` chỉ nhận số nguyên dương \\| x' in text
    assert 'một mình (đo thời gian)' in text and 'cùng lúc với a.ipynb (`--jobs 2`)' in text
    assert 'tăng tốc (speedup): 1.86x (lý tưởng 2x)' in text
    assert 'answer: 42' in text and 'nested.ratio: 1.5' in text


def test_relative_out_with_a_notebook_in_a_subfolder(tmp_path):
    """The worker runs in the notebook's folder: a relative --out must still land under the cwd."""
    (tmp_path / 'sub').mkdir()
    shutil.copy(NB / 'ok.ipynb', tmp_path / 'sub' / 'ok.ipynb')
    run = batch(tmp_path, 'sub', '--out', 'build/x')
    assert run.returncode == 0, run.stdout + run.stderr
    assert entries(tmp_path, 'build/x')['sub/ok.ipynb']['status'] == 'ok'
    assert (tmp_path / 'build' / 'x' / 'sub' / 'ok.ipynb').exists()
    assert not (tmp_path / 'sub' / 'build').exists()
