"""d2lhelpers.reference: reading a stored run (written by gpucheck.record) and printing its figures
as reference data, and this run's headline figures beside stored runs'."""

from __future__ import annotations

import sys

import pytest
from runfixtures import CPU_RUN, DEMO, GPU_RUN, demo_results, demo_run, write_run

import d2lhelpers
from d2lhelpers import reference
from d2lhelpers.reference import (
    ReferenceKeyError,
    compare_runs,
    host_ratio,
    load_run,
    reference_runs,
)

reference_module = sys.modules['d2lhelpers.reference']  # `d2lhelpers.reference` is the function


@pytest.fixture
def runs(tmp_path, monkeypatch):
    run = demo_run('x1-2026-01-02', version='0.0.1')
    run['notebooks'][DEMO]['artefacts'] = {'gflops./GPU:0': 'TF32 was on', 'crossover_n': 'floor'}
    write_run(tmp_path, run)
    write_run(tmp_path, demo_run('x0-2025-12-31', version='0.0.1'))
    monkeypatch.setattr(reference_module, '_runs_dir', lambda: tmp_path)
    return tmp_path


def test_runs_are_listed_oldest_first_and_a_run_must_be_named(runs):
    assert reference_runs() == ['x0-2025-12-31', 'x1-2026-01-02']
    assert load_run('x1-2026-01-02')['id'] == 'x1-2026-01-02'
    with pytest.raises(ValueError, match='không có lần chạy tham khảo'):
        load_run('nope')
    with pytest.raises(TypeError, match='run'):
        reference(DEMO, 'speedup')  # no default run: a notebook names the one it quotes


def test_a_run_of_another_schema_is_refused_by_name(runs):
    run = demo_run('x2-2026-01-03')
    run['schema'] = 2
    write_run(runs, run)
    with pytest.raises(ValueError, match=r"'x2-2026-01-03' có schema 2, cần schema 1"):
        load_run('x2-2026-01-03')


def test_a_reference_reads_raw_figures_and_heads_a_gpu_answer_marked_once(runs):
    ref = reference(f'{DEMO}.ipynb', 'median_s', 'speedup', 'equal', run='x1-2026-01-02')
    assert ref.values == {'median_s': {'a': 0.5, 'b': 0.0012}, 'speedup': 1.27, 'equal': True}
    assert ref['speedup'] == 1.27 and not ref.artefacts
    lines = ref.header.splitlines()
    assert lines[0] == (
        'Đáp án trên GPU (tham khảo), lần chạy x1-2026-01-02: NVIDIA H100 80GB HBM3 × 1, CPU 16 '
        'lõi, ngày 2026-01-02, TensorFlow 2.21.0, notebook phiên bản 0.0.1 (commit abc1234)'
    )
    assert f'cũ hơn notebook này, {d2lhelpers.__version__}' in lines[1]
    assert ref.header.count('(tham khảo)') == 1  # one mark for the whole block below it


def test_artefacts_are_marked_below_and_above_the_marked_key(runs):
    keys = ('gflops./GPU:0.2048', 'gflops', 'crossover_n', 'speedup')
    ref = reference(DEMO, *keys, run='x1-2026-01-02')
    assert ref.artefacts == {
        'gflops./GPU:0.2048': 'TF32 was on',
        'gflops': 'TF32 was on',
        'crossover_n': 'floor',
    }


def test_compare_runs_puts_this_run_beside_stored_runs_with_ratios(runs):
    mine = {'speedup': 0.97, 'median_s': {'a': 0.25, 'b': 0.001}, 'equal': True}
    rows = {'hệ số tăng tốc': 'speedup', 'a': 'median_s.a', 'giống nhau': 'equal'}
    text = compare_runs(DEMO, rows, this=mine, runs=['x0-2025-12-31', 'x1-2026-01-02'])
    lines = text.splitlines()
    assert lines[0].startswith('Lần chạy này so với các lần chạy lưu sẵn')
    assert lines[1].startswith('  x0-2025-12-31: NVIDIA H100') and 'x1-2026-01-02' in lines[3]
    assert [line.split() for line in lines[-4:]] == [
        ['lần', 'chạy', 'này', 'x0-2025-12-31', 'x1-2026-01-02'],
        ['hệ', 'số', 'tăng', 'tốc', '0.97x', '1.27x', '(1.31x)', '1.27x', '(1.31x)'],
        ['a', '250.000', 'ms', '500.000', 'ms', '(2.00x)', '500.000', 'ms', '(2.00x)'],
        ['giống', 'nhau', 'đúng', 'đúng', 'đúng'],  # no ratio of booleans
    ]
    assert '(tham khảo)' not in text  # this run's column is measured: the sanitizer masks it
    with pytest.raises(ReferenceKeyError, match="kết quả của lần chạy này không có khóa 'x'"):
        compare_runs(DEMO, {'x': 'x'}, this=mine, runs=['x1-2026-01-02'])


def test_a_stored_run_without_a_key_shows_a_dash_and_an_artefact_no_figure(runs):
    mine = {'speedup': 0.97, 'new_key': 2.0, 'gflops': {'/GPU:0': {'2048': 10.0}}}
    rows = {'mới': 'new_key', 'GFLOP/s': 'gflops./GPU:0.2048'}
    text = compare_runs(DEMO, rows, this=mine, runs=['x0-2025-12-31', 'x1-2026-01-02'])
    assert [line.split() for line in text.splitlines()[-2:]] == [
        ['mới', '2', '—', '—'],
        ['GFLOP/s', '10', 'GFLOP/s', '1234', 'GFLOP/s', '(123.45x)', 'số', 'đo', 'hỏng'],
    ]  # x1 marks gflops./GPU:0 as an artefact: its figure stays on the run's page


def test_host_ratio_is_the_gpu_probe_over_the_host_cpu_s_best():
    ratio, gpu, cpu = host_ratio(GPU_RUN)
    assert (gpu, round(cpu, 1)) == (34400.0, 1385.6)  # ex1's probe at n = 8192; TF CPU, n = 2048
    assert ratio == pytest.approx(24.83, abs=0.01)


def test_a_current_run_says_nothing_about_versions(runs, monkeypatch):
    monkeypatch.setattr(reference_module, '__version__', '0.0.1')
    assert 'cũ hơn' not in reference(DEMO, 'speedup', run='x1-2026-01-02').header


def test_unknown_notebooks_and_keys_are_clear_errors_naming_the_run(runs):
    with pytest.raises(ReferenceKeyError) as err:
        reference('exercises/00-none', 'x', run='x1-2026-01-02')
    assert str(err.value) == (
        "lần chạy x1-2026-01-02, mục notebooks, không có khóa 'exercises/00-none' "
        f"(thiếu 'exercises/00-none'; ở đó có: [{DEMO!r}])"
    )
    with pytest.raises(ReferenceKeyError) as err:
        reference(DEMO, 'median_s.c', run='x1-2026-01-02')
    assert str(err.value) == (
        f"lần chạy x1-2026-01-02, notebook {DEMO}, không có khóa 'median_s.c' "
        "(thiếu 'c'; ở đó có: ['a', 'b'])"
    )
    assert not isinstance(err.value, KeyError)  # KeyError's message would be a quoted repr
    ref = reference(DEMO, 'speedup', run='x1-2026-01-02')
    with pytest.raises(ReferenceKeyError, match="khóa 'equal' chưa được đọc"):
        ref['equal']


def test_the_stored_runs_ship_with_the_package_and_every_figure_reads():
    runs = reference_runs()
    assert {CPU_RUN, GPU_RUN} <= set(runs)
    for run_id in runs:
        run = load_run(run_id)
        assert run['id'] == run_id
        for name, entry in run['notebooks'].items():
            ref = reference(name, *entry['results'], run=run_id)
            assert ref.values == entry['results'] and ref.header.count('(tham khảo)') == 1


def test_demo_results_are_what_save_results_stores():
    assert demo_results()['gflops'] == {'/GPU:0': {'2048': 1234.5}}  # keys as JSON has them
