"""d2lhelpers.reference: reading a stored GPU run and printing its figures as reference data."""

from __future__ import annotations

import json
import sys

import pytest

import d2lhelpers
from d2lhelpers import reference
from d2lhelpers.reference import load_run, reference_runs

reference_module = sys.modules['d2lhelpers.reference']  # `d2lhelpers.reference` is the function

RUN = {
    'id': 'x1-2026-01-02',
    'date': '2026-01-02',
    'commit': 'abc1234',
    'collection_version': '0.0.1',
    'machine': {'gpu': 'NVIDIA X1', 'gpu_count': 2},
    'software': {'tensorflow': '2.21.0'},
    'notebooks': {
        'exercises/99-demo': {
            'results': {
                'median_s': {'a': 0.5, 'b': 0.0012},
                'speedup': 1.27,
                'gflops': {'/GPU:0': {'2048': 1234.5}},
                'crossover_n': 256,
                'equal': True,
            },
            'artefacts': {'gflops./GPU:0': 'TF32 was on', 'crossover_n': 'at the floor'},
            'probe': {'speedup_by_n': {'2000': 0.72, '6000': 0.99}},
        }
    },
}


@pytest.fixture
def runs(tmp_path, monkeypatch):
    (tmp_path / 'x1-2026-01-02.json').write_text(json.dumps(RUN))
    (tmp_path / 'x0-2025-12-31.json').write_text(json.dumps({**RUN, 'id': 'x0-2025-12-31'}))
    monkeypatch.setattr(reference_module, '_runs_dir', lambda: tmp_path)
    return tmp_path


def test_runs_are_listed_oldest_first_and_the_newest_is_the_default(runs):
    assert reference_runs() == ['x0-2025-12-31', 'x1-2026-01-02']
    assert load_run()['id'] == 'x1-2026-01-02'
    with pytest.raises(ValueError, match='không có lần chạy tham khảo'):
        load_run('nope')


def test_figures_are_formatted_by_their_key_and_labelled_as_reference(runs):
    ref = reference('exercises/99-demo.ipynb', 'median_s', 'speedup', 'probe.speedup_by_n', 'equal')
    lines = str(ref).splitlines()
    assert lines[0].startswith(
        'Số đo tham khảo (dữ liệu lưu sẵn, không phải lần chạy này): NVIDIA X1'
    )
    assert 'notebook phiên bản 0.0.1 (commit abc1234)' in lines[0]
    assert f'cũ hơn notebook này, {d2lhelpers.__version__}' in lines[1]
    assert '  median_s: a: 500.000 ms, b: 1.200 ms (tham khảo)' in lines
    assert '  speedup: 1.27x (tham khảo)' in lines
    assert '  probe.speedup_by_n: 2000: 0.72x, 6000: 0.99x (tham khảo)' in lines
    assert '  equal: đúng (tham khảo)' in lines
    assert ref['speedup'] == 1.27 and not ref.artefacts


def test_artefacts_are_marked_below_and_above_the_marked_key(runs):
    ref = reference('exercises/99-demo', 'gflops./GPU:0.2048', 'gflops', 'crossover_n', 'speedup')
    assert set(ref.artefacts) == {'gflops./GPU:0.2048', 'gflops', 'crossover_n'}
    text = str(ref)
    assert (
        '  gflops./GPU:0.2048: 1234 GFLOP/s (tham khảo)\n'
        '    số đo hỏng (artefact): TF32 was on (tham khảo)'
    ) in text


def test_a_current_run_says_nothing_about_versions(runs, monkeypatch):
    monkeypatch.setattr(reference_module, '__version__', '0.0.1')
    assert 'cũ hơn' not in str(reference('exercises/99-demo', 'speedup'))


def test_unknown_notebooks_and_keys_are_named(runs):
    with pytest.raises(ValueError, match="'exercises/00-none'"):
        reference('exercises/00-none', 'x')
    with pytest.raises(KeyError, match="'median_s.c'"):
        reference('exercises/99-demo', 'median_s.c')


def test_the_stored_runs_ship_with_the_package_and_every_figure_reads():
    runs = reference_runs()
    assert 'h200-2026-11-30' in runs
    for run_id in runs:
        run = load_run(run_id)
        assert run['id'] == run_id
        for name, entry in run['notebooks'].items():
            keys = [*entry.get('results', {}), *('probe.' + k for k in entry.get('probe', {}))]
            ref = reference(name, *keys, run=run_id)
            assert str(ref).count('(tham khảo)') == len(keys) + len(ref.artefacts)
