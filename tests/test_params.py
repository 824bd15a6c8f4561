"""d2lhelpers.params: parameter checks whose messages name the parameter, and save_results."""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest

from d2lhelpers import (
    BenchmarkResult,
    check_choice,
    check_int_list,
    check_positive_int,
    save_results,
)

# --- check_positive_int ----------------------------------------------------------------------


def test_positive_int_returns_the_value():
    assert check_positive_int('n', 3) == 3


@pytest.mark.parametrize('bad', [0, -5])
def test_positive_int_rejects_non_positive(bad):
    with pytest.raises(ValueError, match='`n`'):
        check_positive_int('n', bad)


@pytest.mark.parametrize('bad', [1.5, '3', True, None])
def test_positive_int_rejects_non_int(bad):
    with pytest.raises(TypeError, match='`n`'):
        check_positive_int('n', bad)


# --- check_int_list --------------------------------------------------------------------------


def test_int_list_returns_a_list():
    assert check_int_list('sizes', (64, 128)) == [64, 128]


def test_int_list_reads_papermill_text():
    assert check_int_list('sizes', '[64, 128]') == [64, 128]


def test_int_list_reads_text_with_spaces():
    assert check_int_list('sizes', ' [1,2] ') == [1, 2]


@pytest.mark.parametrize('bad', ['[-1]', '[0, 2]', [1.5], [True], [64, 'x']])
def test_int_list_rejects_bad_elements(bad):
    with pytest.raises(ValueError, match='`sizes`'):
        check_int_list('sizes', bad)


@pytest.mark.parametrize('bad', ['[]', [], ()])
def test_int_list_rejects_empty(bad):
    with pytest.raises(ValueError, match='`sizes`.*rỗng'):
        check_int_list('sizes', bad)


@pytest.mark.parametrize('bad', ['abc', '64', 64, None, {'a': 1}])
def test_int_list_rejects_non_lists(bad):
    with pytest.raises(TypeError, match='`sizes`'):
        check_int_list('sizes', bad)


# --- check_choice ----------------------------------------------------------------------------


def test_choice_returns_the_value():
    assert check_choice('dtype', 'float16', ['float32', 'float16']) == 'float16'


def test_choice_message_names_parameter_and_choices():
    with pytest.raises(ValueError, match=r"`dtype` = 'int8'.*\['float32', 'float16'\]"):
        check_choice('dtype', 'int8', ('float32', 'float16'))


def test_choice_accepts_a_generator():
    assert check_choice('k', 2, (i for i in range(3))) == 2


# --- save_results ----------------------------------------------------------------------------


def test_save_results_returns_the_dict_and_writes_json(tmp_path):
    path = tmp_path / 'out' / 'r.json'
    data = save_results({'a': 1, 'b': [1, 2]}, path)
    assert data == {'a': 1, 'b': [1, 2]} == json.loads(path.read_text(encoding='utf-8'))


def test_save_results_none_path_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert save_results({'a': 1}, None) == {'a': 1}
    assert list(tmp_path.iterdir()) == []


def test_save_results_numpy_scalars_become_numbers(tmp_path):
    path = tmp_path / 'r.json'
    save_results({'f': np.float32(1.5), 'i': np.int64(7), 'b': np.bool_(True)}, path)
    text = path.read_text(encoding='utf-8')
    assert json.loads(text) == {'f': 1.5, 'i': 7, 'b': True} and '"1.5"' not in text


def test_save_results_nan_and_inf_become_null(tmp_path):
    path = tmp_path / 'r.json'
    data = save_results({'nan': float('nan'), 'inf': np.float64(math.inf)}, path)
    assert data == {'nan': None, 'inf': None}
    assert 'NaN' not in path.read_text() and json.loads(path.read_text()) == data


def test_save_results_uses_as_dict(tmp_path):
    data = save_results({'mm': BenchmarkResult(times=(1.0,), label='mm')}, tmp_path / 'r.json')
    assert data['mm']['median_s'] == 1.0 and data['mm']['runs'] == 1


def test_save_results_replaces_atomically(tmp_path, monkeypatch):
    path = tmp_path / 'r.json'
    save_results({'v': 1}, path)

    def broken_replace(src, dst):
        raise OSError('disk full')

    monkeypatch.setattr(os, 'replace', broken_replace)
    with pytest.raises(OSError, match='disk full'):
        save_results({'v': 2}, path)
    assert json.loads(path.read_text()) == {'v': 1}  # the old file is intact
    assert [p.name for p in tmp_path.iterdir()] == ['r.json']  # no temporary file left


def test_save_results_leaves_no_temporary_file(tmp_path):
    save_results({'v': 1}, tmp_path / 'r.json')
    assert [p.name for p in tmp_path.iterdir()] == ['r.json']


def test_save_results_accepts_a_string_path(tmp_path):
    save_results({'v': 1}, str(tmp_path / 'r.json'))
    assert (tmp_path / 'r.json').exists()


@pytest.mark.parametrize('bad', [5, ''])
def test_save_results_bad_path_is_a_type_error(bad):
    with pytest.raises(TypeError, match='`results_path`'):
        save_results({'v': 1}, bad)


def test_save_results_non_dict_is_a_type_error(tmp_path):
    with pytest.raises(TypeError, match='`results`'):
        save_results([1, 2], tmp_path / 'r.json')
