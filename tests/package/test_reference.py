"""d2lhelpers.reference: reading a stored run (written by gpucheck.record) and printing its figures
as reference data, beside this run's own when asked."""

from __future__ import annotations

import sys

import pytest
from runfixtures import CPU_RUN, DEMO, GPU_RUN, demo_results, demo_run, write_run

import d2lhelpers
from d2lhelpers import reference
from d2lhelpers.reference import ReferenceKeyError, load_run, reference_runs

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


def test_figures_are_formatted_by_their_key_and_labelled_as_reference(runs):
    ref = reference(f'{DEMO}.ipynb', 'median_s', 'speedup', 'equal', run='x1-2026-01-02')
    lines = str(ref).splitlines()
    assert lines[0] == (
        'Số đo tham khảo (dữ liệu lưu sẵn) của x1-2026-01-02: NVIDIA H100 80GB HBM3 × 1, CPU 16 '
        'lõi, ngày 2026-01-02, TensorFlow 2.21.0, notebook phiên bản 0.0.1 (commit abc1234)'
    )
    assert f'cũ hơn notebook này, {d2lhelpers.__version__}' in lines[1]
    assert '    x1-2026-01-02: a: 500.000 ms, b: 1.200 ms (tham khảo)' in lines
    assert '    x1-2026-01-02: 1.27x (tham khảo)' in lines
    assert '    x1-2026-01-02: đúng (tham khảo)' in lines
    assert ref['speedup'] == 1.27 and not ref.artefacts


def test_this_run_is_printed_above_the_stored_figure(runs):
    mine = {'speedup': 0.97, 'median_s': {'a': 0.25, 'b': 0.001}}
    text = str(reference(DEMO, 'speedup', 'median_s.a', run='x1-2026-01-02', this=mine))
    assert (
        '  speedup:\n    lần chạy này: 0.97x\n    x1-2026-01-02: 1.27x (tham khảo)\n'
        '  median_s.a:\n    lần chạy này: 250.000 ms\n    x1-2026-01-02: 500.000 ms (tham khảo)'
    ) in text
    with pytest.raises(ReferenceKeyError, match="kết quả của lần chạy này không có khóa 'equal'"):
        reference(DEMO, 'equal', run='x1-2026-01-02', this=mine)


def test_artefacts_are_marked_below_and_above_the_marked_key(runs):
    keys = ('gflops./GPU:0.2048', 'gflops', 'crossover_n', 'speedup')
    ref = reference(DEMO, *keys, run='x1-2026-01-02')
    assert set(ref.artefacts) == {'gflops./GPU:0.2048', 'gflops', 'crossover_n'}
    assert (
        '    x1-2026-01-02: 1234 GFLOP/s (tham khảo)\n'
        '    số đo hỏng (artefact): TF32 was on (tham khảo)'
    ) in str(ref)


def test_a_current_run_says_nothing_about_versions(runs, monkeypatch):
    monkeypatch.setattr(reference_module, '__version__', '0.0.1')
    assert 'cũ hơn' not in str(reference(DEMO, 'speedup', run='x1-2026-01-02'))


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
            assert str(ref).count('(tham khảo)') == len(entry['results']) + len(ref.artefacts)


def test_demo_results_are_what_save_results_stores():
    assert demo_results()['gflops'] == {'/GPU:0': {'2048': 1234.5}}  # keys as JSON has them
