"""d2lhelpers.results: save_results and the JSON of measurements (TF-free)."""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest

from d2lhelpers import compare, format_seconds, save_results
from d2lhelpers.timing import BenchmarkResult


@pytest.mark.parametrize(
    'seconds, text',
    [
        (1.5, '1.500 s'),
        (0.0123456, '12.346 ms'),
        (0.0000123, '12.3 µs'),
        (-0.0068094, '-6.809 ms'),  # a difference of two medians: the unit follows the size
        (-0.0000359, '-35.9 µs'),
    ],
)
def test_format_seconds_picks_the_unit(seconds, text):
    assert format_seconds(seconds) == text


def test_save_results_writes_json_and_returns_it(tmp_path):
    path = tmp_path / 'out' / 'r.json'
    data = save_results({'a': 1, 'b': (1, 2)}, path)
    assert data == {'a': 1, 'b': [1, 2]} == json.loads(path.read_text(encoding='utf-8'))
    assert [p.name for p in path.parent.iterdir()] == ['r.json']


def test_save_results_none_path_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert save_results({'a': 1}, None) == {'a': 1}
    assert list(tmp_path.iterdir()) == []


def test_save_results_converts_numpy_values_and_arrays():
    data = save_results(
        {
            'f': np.float32(1.5),
            'i': np.int64(7),
            'b': np.bool_(True),
            'v': np.arange(3),
            'm': np.eye(2, dtype=np.float32),
            'nan': float('nan'),
            'inf': np.float64(math.inf),
        },
        None,
    )
    assert data == {
        'f': 1.5,
        'i': 7,
        'b': True,
        'v': [0, 1, 2],
        'm': [[1.0, 0.0], [0.0, 1.0]],
        'nan': None,
        'inf': None,
    }
    assert json.loads(json.dumps(data)) == data


def test_save_results_uses_as_dict():
    # exercise 2 saves a Comparison: compare() builds it
    a, b = BenchmarkResult(times=(1.0, 2.0, 3.0)), BenchmarkResult(times=(4.0, 4.0, 4.0))
    data = save_results({'c': compare(a, b)}, None)
    assert data['c'] == {'ratio': 0.5, 'low': 0.375, 'high': 0.625, 'kind': 'faster'}


@pytest.mark.parametrize('bad, match', [(5, '`results_path`'), ('', '`results_path`')])
def test_save_results_bad_path(bad, match):
    with pytest.raises(TypeError, match=match):
        save_results({'v': 1}, bad)


def test_save_results_non_dict():
    with pytest.raises(TypeError, match='`results` phải là một dict'):
        save_results([1, 2], None)


def test_a_failed_write_keeps_the_old_file_and_leaves_nothing(tmp_path, monkeypatch):
    path = tmp_path / 'r.json'
    save_results({'a': 1}, path)

    def broken(*args):
        raise OSError('disk full')

    monkeypatch.setattr(os, 'replace', broken)
    with pytest.raises(OSError, match='disk full'):
        save_results({'a': 2}, path)
    assert json.loads(path.read_text()) == {'a': 1}
    assert [p.name for p in tmp_path.iterdir()] == ['r.json']
