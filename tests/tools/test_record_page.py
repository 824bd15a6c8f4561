"""gpucheck's recorder, pages and command line, and the run file's one schema.

No GPU and, but for one subprocess test, no TensorFlow: runs are built by the real producers
(tests/runfixtures.py), never typed as a run file by hand.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import fields
from pathlib import Path

import psutil
import pytest
from batch_support import copy
from gpucheck import driver, page, record
from gpufixtures import T4, build_run
from runfixtures import BATCH_CPU, CPU_RUN, GPU_RUN, demo_summary, gpu_env

import d2lhelpers
from d2lhelpers.devices import GPUInfo
from d2lhelpers.reference import ReferenceKeyError, load_run, lookup, reference_runs

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / 'd2lhelpers' / 'runs'
TARGET = re.compile(r'\((mục tiêu [^():]*)')  # in a headline: '(mục tiêu ≤ 1.2x: ...)'


# -- the schema: one shape, written by record ----------------------------------------------------


def test_every_stored_run_has_the_one_schema_as_record_writes_it():
    top = ['schema', 'id', 'date', 'commit', 'collection_version', 'command', 'machine']
    top += ['software', 'gpu_tests', 'notes', 'notebooks']
    made = record.build_run(demo_summary(), 'x-2027-01-01', smi=[])
    assert list(made) == top
    for run_id in reference_runs():
        run = load_run(run_id)
        assert list(run) == top, run_id
        assert set(run['machine']) == set(made['machine']), run_id
        assert set(run['software']) == set(made['software']), run_id
        for name, nb in run['notebooks'].items():
            assert list(nb) == list(made['notebooks']['exercises/99-demo']), name
            for key in nb['artefacts']:
                lookup(nb['results'], key, name)  # a mark names a saved figure
        assert (RUNS / f'{run_id}.json').read_text('utf-8') == record.dumps(run)


def test_record_reads_what_env_report_writes():
    gpu_fields = {f.name for f in fields(GPUInfo)}
    assert set(record.GPU_FIELDS) <= gpu_fields
    run = record.build_run(demo_summary(), 'h100-2027-01-15', smi=[])
    assert run['machine']['gpus'] == [
        {
            'device': '/GPU:0',
            'name': 'NVIDIA H100 80GB HBM3',
            'compute_capability': '9.0',
            'physical': 0,
            'memory_total_mb': 81559.0,
            'memory_limit_mb': None,
        }
    ]
    assert run['machine']['gpu_memory'] == '81559 MiB'  # from env_report, not only nvidia-smi
    assert run['machine']['gpu_count'] == 1 and run['machine']['cpu_cores'] == 16
    mixed = demo_summary(gpu_env(('NVIDIA H100 80GB HBM3', 'Tesla T4')))
    two = record.build_run(mixed, 'x-2027-01-15', smi=[])
    assert [g['name'] for g in two['machine']['gpus']] == ['NVIDIA H100 80GB HBM3', 'Tesla T4']


def test_record_writes_a_file_refuses_to_overwrite_and_reads_the_gpu_tests(tmp_path):
    build = tmp_path / 'build'
    build.mkdir()
    (build / 'summary.json').write_text(json.dumps(demo_summary()), encoding='utf-8')
    out = tmp_path / 'runs'
    smi = [{'driver_version': '580.1', 'name': 'NVIDIA H100 80GB HBM3', 'memory.total': '81559'}]
    path = record.record(build, 'h100-2027-01-15', out=out, smi=smi)
    run = json.loads(path.read_text('utf-8'))
    assert run['date'] == '2027-01-15' and run['commit'] == 'abc1234'
    assert run['machine']['driver'] == '580.1' and run['gpu_tests'] is None
    assert run['collection_version'] == d2lhelpers.__version__
    with pytest.raises(record.RecordError, match='--force'):
        record.record(build, 'h100-2027-01-15', out=out, smi=smi)
    assert record.main([str(build), '--id', 'h100-2027-01-15', '--out', str(out)]) == 1
    counts = {'passed': 2, 'failed': 0, 'skipped': 0, 'errors': 0}
    (build / record.GPU_TESTS).write_text(json.dumps(counts), encoding='utf-8')
    record.record(build, 'h100-2027-01-15', out=out, smi=smi, driver='555', force=True)
    run = json.loads(path.read_text('utf-8'))
    assert run['machine']['driver'] == '555' and run['gpu_tests'] == counts
    assert sorted(p.name for p in out.iterdir()) == ['h100-2027-01-15.json']  # no temp file
    with pytest.raises(record.RecordError, match='summary.json'):
        record.record(tmp_path / 'nowhere', 'x-2027-01-01', out=out, smi=[])


def test_the_cpu_reference_run_is_what_record_makes_of_its_batch():
    summary = json.loads((BATCH_CPU / 'summary.json').read_text('utf-8'))
    stored = load_run(CPU_RUN)
    made = record.build_run(summary, CPU_RUN, smi=[], version=stored['collection_version'])
    assert made == stored
    assert stored['machine']['gpu'] is None and stored['machine']['cpu_cores'] == 2


# -- pages ---------------------------------------------------------------------------------------


def test_committed_pages_are_the_generated_ones():
    for run_id in reference_runs():
        assert page.page_path(run_id).read_text('utf-8') == page.render(load_run(run_id)), (
            f'docs/runs/{run_id}.md differs from its run: PYTHONPATH=tools python -m gpucheck.page'
        )
        for line in page.page_path(run_id).read_text('utf-8').splitlines():
            if line.startswith('!['):
                png = line[line.index('](') + 2 : -1]
                assert (page.DOCS / png).is_file(), png


def test_any_run_renders_with_its_plots_and_the_packages_formatter(tmp_path):
    run = record.build_run(demo_summary(), 'h100-2027-01-15', smi=[])
    text = page.render(run, plots_to=tmp_path)
    assert text.startswith('# Số đo của lần chạy h100-2027-01-15: NVIDIA H100 80GB HBM3')
    assert '| `speedup` | 1.27x |' in text and '| `equal` | đúng |' in text
    assert '| `gflops./GPU:0` | 2048: 1234 GFLOP/s |' in text
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        'exercises__99-demo-gflops.png',
        'exercises__99-demo-median_s.png',
    ]
    run['notebooks']['exercises/99-demo']['artefacts'] = {'nope': 'x'}
    with pytest.raises(ReferenceKeyError, match="'nope'"):
        page.render(run)


#: Sentences of a GPU run's page that a CPU run's page must not carry.
GPU_WORDING = [
    'trên một GPU',
    'chưa có GPU',
    'driver',
    'CUDA',
    'cuDNN',
    'pytest -m gpu',
    'Phép đo thêm',
    'data sheet',
    'máy có GPU',
    'make gpu-check',
]


def test_the_cpu_page_has_no_gpu_wording_and_no_python_none():
    text = page.page_path(CPU_RUN).read_text('utf-8')
    assert 'None' not in text
    assert [w for w in GPU_WORDING if w in text] == []
    assert 'CPU 2 lõi' in text and '| GPU | không có |' in text
    assert 'crossover_n: không có' in text  # a stored headline's None, in words
    # the run note on TF32 says which notebooks it is about
    assert 'TF32 bật khi `env_report()` chạy (' in text
    assert 'chỉ nói về các notebook để TF32 ở mặc định' in text


def test_a_gpu_run_with_missing_values_prints_no_python_none():
    run = record.build_run(demo_summary(), 'h100-2027-01-15', smi=[])  # no driver, no CUDA libs
    run['software']['cudnn'] = None
    text = page.render(run)
    assert 'None' not in text
    assert 'driver không có, thư viện CUDA: không có' in text
    assert '(CUDA 12.5.1, cuDNN không có)' in text
    assert 'kiểm thử gpu (pytest -m gpu) | không có' in text  # a GPU run keeps the row


@pytest.mark.parametrize('run_id', reference_runs())
def test_a_headline_target_of_an_older_version_has_a_run_note(run_id):
    """A stored headline keeps what its notebook printed; where that names a target ("mục tiêu
    ...") of a version today's notebooks no longer have, a run note says so (shown on the page)."""
    run = load_run(run_id)
    old = run['collection_version'] != d2lhelpers.__version__
    targets = [t for nb in run['notebooks'].values() for t in TARGET.findall(nb['headline'])]
    for target in targets if old else []:
        notes = [n for n in run['notes'] if f'"{target}"' in n and 'không còn mục tiêu này' in n]
        assert notes, f'{run_id}: "{target}" (phiên bản {run["collection_version"]}) cần ghi chú'
    if run_id == GPU_RUN:
        assert targets == ['mục tiêu ≤ 1.2x']  # exercise 3's, kept as the run stored it
        assert 'không còn mục tiêu này' in page.page_path(run_id).read_text('utf-8')


def test_page_writes_the_rendered_page_and_its_plots(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(page, 'DOCS', tmp_path)
    assert page.main([GPU_RUN]) == 0 and 'đã ghi' in capsys.readouterr().out
    assert (tmp_path / f'{GPU_RUN}.md').read_text('utf-8') == page.render(load_run(GPU_RUN))
    assert sorted(p.name for p in (tmp_path / GPU_RUN).iterdir()) == sorted(
        p.name for p in (ROOT / 'docs' / 'runs' / GPU_RUN).iterdir()
    )


# -- make gpu-check: the driver, TensorFlow, the batch -------------------------------------------


def test_driver_gpus_come_from_the_seam_or_the_driver(monkeypatch, capsys):
    monkeypatch.setenv(driver.FAKE, 'GPU 0: NVIDIA H100 (UUID: x); GPU 1: Tesla T4')
    assert driver.driver_gpus() == ['GPU 0: NVIDIA H100 (UUID: x)', 'GPU 1: Tesla T4']
    assert driver.main() == 0
    monkeypatch.setenv(driver.FAKE, '')
    assert driver.main() == driver.NONE
    assert 'bỏ qua — không có GPU' in capsys.readouterr().out


def _gpucheck(env: dict[str, str]) -> subprocess.CompletedProcess:
    env = {**os.environ, 'PYTHONPATH': str(ROOT / 'tools'), **env}
    return subprocess.run(
        [sys.executable, '-m', 'gpucheck', '--out', '/nonexistent/never-written'],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_gpu_check_fails_when_the_driver_shows_a_gpu_tensorflow_cannot_use():
    proc = _gpucheck({driver.FAKE: 'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-fake)'})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert 'driver thấy 1 GPU (GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-fake))' in proc.stdout
    assert 'là bản chỉ CPU (is_cuda_build = False)' in proc.stdout
    assert not Path('/nonexistent').exists()


def test_gpu_check_skips_when_there_is_no_gpu_anywhere(monkeypatch, capsys):
    import gpucheck.__main__ as gpu_check

    monkeypatch.setattr(gpu_check, 'driver_gpus', lambda: [])
    monkeypatch.setattr(gpu_check, 'tf_probe', lambda: ('2.21.0', False, 0, ''))
    monkeypatch.setattr(gpu_check, 'run_batch', lambda *a: pytest.fail('must not run anything'))
    assert gpu_check.main([]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out == [
        'gpu-check: bỏ qua — không có GPU (driver NVIDIA không thấy GPU nào; '
        'TensorFlow 2.21.0 không thấy GPU nào)'
    ]


def test_a_cuda_build_that_sees_no_gpu_prints_tensorflows_words():
    import gpucheck.__main__ as gpu_check

    said = 'W ... Cannot dlopen some GPU libraries. Skipping registering GPU devices...'
    text = gpu_check.unusable_reason('2.21.0', True, said)
    assert text.endswith(said) and 'bản có CUDA' in text


def test_junit_counts_a_skip_and_a_missing_file(tmp_path):
    import gpucheck.__main__ as gpu_check

    xml = tmp_path / 'r.xml'
    xml.write_text(
        '<testsuites><testsuite tests="4" failures="0" errors="0" skipped="3">'
        '<testcase classname="tests.a" name="ok"><system-out>x</system-out></testcase>'
        '<testcase classname="tests.a" name="skip"><skipped message="no GPU"/></testcase>'
        '<testcase classname="tests.a" name="bad"><failure message="x"/></testcase>'
        '<testcase classname="" name="tests.b"><skipped message="collection skipped"/></testcase>'
        '<testcase classname="" name="tests.c"><error message="collection failure"/></testcase>'
        '</testsuite></testsuites>'
    )
    assert gpu_check.junit_counts(xml) == {'passed': 1, 'failed': 1, 'skipped': 1, 'errors': 1}
    missing = gpu_check.junit_counts(tmp_path / 'none.xml')
    assert missing == {'passed': 0, 'failed': 0, 'skipped': 0, 'errors': 1}


def gpu_marked_tests() -> set[str]:
    """Names of the test functions decorated ``@pytest.mark.gpu`` (read, not collected)."""
    names = set()
    for path in (ROOT / 'tests').rglob('test_*.py'):
        for node in ast.walk(ast.parse(path.read_text('utf-8'))):
            if isinstance(node, ast.FunctionDef) and any(
                ast.unparse(d) == 'pytest.mark.gpu' for d in node.decorator_list
            ):
                names.add(node.name)
    return names


def test_the_gpu_test_step_without_nbval_counts_only_the_gpu_tests(tmp_path, monkeypatch):
    """Colab's and Kaggle's own environments have no nbval: the modules that need it are
    skipped at collection, and the step's counts hold exactly the gpu-marked tests (all skipped
    on this machine without a GPU; passed on a healthy GPU)."""
    import gpucheck.__main__ as gpu_check

    blocker = tmp_path / 'blocked' / 'nbval'
    blocker.mkdir(parents=True)
    (blocker / '__init__.py').write_text("raise ModuleNotFoundError('nbval blocked')\n")
    path = os.pathsep.join([str(blocker.parent), str(ROOT / 'tools'), str(ROOT)])
    monkeypatch.setenv('PYTHONPATH', path)
    counts = gpu_check.gpu_tests(gpu_check.Log(tmp_path / 'log'), tmp_path)
    expected = gpu_marked_tests()
    assert len(expected) >= 2
    assert counts == {'passed': 0, 'failed': 0, 'skipped': len(expected), 'errors': 0}
    cases = ET.parse(tmp_path / 'gpu-tests.xml').getroot().iter('testcase')
    ran = {c.get('name') for c in cases if c.get('classname')}
    assert ran == expected
    assert 'collection skipped' in (tmp_path / 'gpu-tests.xml').read_text('utf-8')


@pytest.mark.parametrize('second', [None, T4], ids=['T4', 'T4x2'])
def test_a_healthy_t4_run_passes_check_run(tmp_path, capsys, second):
    import gpucheck.__main__ as gpu_check

    downloaded = tmp_path / 'run.json'
    downloaded.write_text(record.dumps(build_run(T4, second)))
    assert gpu_check.main(['--check-run', str(downloaded)]) == 0, capsys.readouterr().out
    assert ' 0 hỏng, 0 chưa kiểm' in capsys.readouterr().out


def test_a_downloaded_run_json_is_checked_then_recorded_under_its_id(tmp_path, capsys):
    import gpucheck.__main__ as gpu_check

    downloaded = tmp_path / 'run.json'
    downloaded.write_text(record.dumps(record.build_run(demo_summary(), 'run', smi=[])))
    assert gpu_check.main(['--check-run', str(downloaded)]) == 1  # no gpu tests, demo results
    out = capsys.readouterr().out.splitlines()
    assert out[-1].startswith('gpu-check: ') and ' hỏng, ' in out[-1]
    assert 'kiểm thử gpu' in '\n'.join(out)  # the run has no gpu tests: rejected
    path = record.record(downloaded, 't4-2027-01-20', out=tmp_path / 'runs')
    run = json.loads(path.read_text('utf-8'))
    assert (run['id'], run['date']) == ('t4-2027-01-20', '2027-01-20')
    assert run['notebooks'] == json.loads(downloaded.read_text('utf-8'))['notebooks']
    old = tmp_path / 'old.json'
    old.write_text(json.dumps({**run, 'schema': 0}))
    with pytest.raises(record.RecordError, match='schema 0'):
        record.record(old, 'x-2027-01-21', out=tmp_path / 'runs')


def test_one_nvidia_smi_query_feeds_env_report_and_the_recorder(tmp_path, monkeypatch):
    from d2lhelpers.devices import smi_rows

    fake = tmp_path / 'nvidia-smi'
    fake.write_text(
        '#!/bin/sh\n'
        'case "$*" in *name,memory.total,driver_version*)\n'
        '  echo "NVIDIA H100 80GB HBM3, 81559, 580.65.06";;\n'
        '*) exit 2;;\nesac\n'
    )
    fake.chmod(0o755)
    monkeypatch.setenv('PATH', f'{tmp_path}{os.pathsep}{os.environ["PATH"]}')
    assert smi_rows() == [
        {
            'name': 'NVIDIA H100 80GB HBM3',
            'memory.total': '81559',
            'driver_version': '580.65.06',
        }
    ]
    machine = record.build_run({}, 'x-2027-01-01', smi=smi_rows())['machine']  # no env report
    assert (machine['gpu'], machine['gpu_memory'], machine['driver']) == (
        'NVIDIA H100 80GB HBM3',
        '81559 MiB',
        '580.65.06',
    )


def test_a_run_cut_before_the_environment_report_does_not_blame_tensorflow():
    from gpucheck import check

    run = build_run()
    run['machine']['gpus'], run['software']['tensorflow'] = [], None  # the batch was cut short
    bad = [f for f in check.failed(check.check_run(run)) if f.notebook == '-']
    assert 'đợt chạy dừng trước khi ghi nó' in bad[0].detail
    assert 'TensorFlow không thấy GPU' not in bad[0].detail


def test_the_batch_does_not_inherit_kaggles_marker(monkeypatch):
    import gpucheck.__main__ as gpu_check

    monkeypatch.setenv('KAGGLE_KERNEL_RUN_TYPE', 'Interactive')
    assert 'KAGGLE_KERNEL_RUN_TYPE' not in gpu_check._env()


def test_tensorflow_seeing_fewer_gpus_than_the_driver_fails(monkeypatch, capsys):
    import gpucheck.__main__ as gpu_check

    monkeypatch.setattr(gpu_check, 'driver_gpus', lambda: ['GPU 0: Tesla T4', 'GPU 1: Tesla T4'])
    monkeypatch.setattr(gpu_check, 'tf_probe', lambda: ('2.21.0', True, 1, ''))
    monkeypatch.setattr(gpu_check, 'run_batch', lambda *a: pytest.fail('must not run anything'))
    monkeypatch.delenv('CUDA_VISIBLE_DEVICES', raising=False)
    assert gpu_check.main(['--out', '/nonexistent/never-written']) == 1
    assert 'TensorFlow chỉ dùng được 1' in capsys.readouterr().out
    monkeypatch.setenv('CUDA_VISIBLE_DEVICES', '0')  # one GPU asked for: one GPU is right
    assert gpu_check.visible_gpus(['GPU 0: Tesla T4', 'GPU 1: Tesla T4']) == 1


def test_out_is_emptied_only_when_gpucheck_wrote_it(tmp_path, monkeypatch, capsys):
    import gpucheck.__main__ as gpu_check

    monkeypatch.setattr(gpu_check, 'driver_gpus', lambda: ['GPU 0: Tesla T4'])
    monkeypatch.setattr(gpu_check, 'tf_probe', lambda: ('2.21.0', True, 1, ''))
    monkeypatch.setattr(gpu_check, 'run_batch', lambda *a: pytest.fail('must not run anything'))
    (tmp_path / 'mine.txt').write_text('keep me')
    assert gpu_check.main(['--out', str(tmp_path)]) == 2
    assert (tmp_path / 'mine.txt').read_text() == 'keep me'
    assert 'không xóa' in capsys.readouterr().out
    assert gpu_check.usable_out(tmp_path / 'absent')
    (tmp_path / gpu_check.LOG).write_text('')
    assert gpu_check.usable_out(tmp_path)


def test_a_batch_past_its_time_is_stopped_and_leaves_nothing_running(tmp_path, monkeypatch):
    import gpucheck.__main__ as gpu_check
    from nbrun import processes

    token = f'gpucheck-test-{os.getpid()}'
    monkeypatch.setattr(processes, 'new_token', lambda: token)
    lines = []
    copy(tmp_path, 'hang')  # its marker file is written beside it, not in the checkout
    monkeypatch.setattr(gpu_check, 'ROOT', tmp_path)
    status = gpu_check.run_batch(lines.append, tmp_path / 'out', timeout=3, paths=('hang.ipynb',))
    assert status == 124 and 'quá 3 s: dừng nó (SIGTERM)' in '\n'.join(lines)
    assert json.loads((tmp_path / 'out' / 'summary.json').read_text('utf-8'))['ending'] == 'SIGTERM'
    ours = [p.info['environ'] or {} for p in psutil.process_iter(['environ'])]
    assert [e for e in ours if e.get(processes.TOKEN_VAR, '').startswith(token)] == []


def test_the_probe_runs_one_op_on_the_gpu():
    import gpucheck.__main__ as gpu_check

    assert 'tf.reduce_sum(tf.ones(4))' in gpu_check._PROBE and 'gpus = []' in gpu_check._PROBE
    ast.parse(gpu_check._PROBE)
