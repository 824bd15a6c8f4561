"""d2lhelpers.checks: each check returns the value or raises naming the parameter, in Vietnamese."""

from __future__ import annotations

import math

import pytest

from d2lhelpers import check_auto, check_int, check_int_list
from d2lhelpers.checks import check_number, device_name


def test_int_checks_return_the_value():
    assert (check_int('k', 0, 0), check_int('n', 3)) == (0, 3)


@pytest.mark.parametrize(
    'bad, error, message',
    [
        (0, ValueError, 'tham số `n` phải >= 1, nhận được 0'),
        (-5, ValueError, '`n` phải >= 1'),
        (1.5, TypeError, 'tham số `n` phải là số nguyên, nhận được 1.5 (float)'),
        ('3', TypeError, "nhận được '3' (str)"),
        (True, TypeError, '(bool)'),
        (None, TypeError, '(NoneType)'),
    ],
)
def test_int_check_names_the_parameter(bad, error, message):
    with pytest.raises(error) as info:
        check_int('n', bad)  # minimum 1 by default
    assert message in str(info.value)


def test_int_check_with_a_minimum_names_it():
    with pytest.raises(ValueError, match='tham số `i` phải >= 0, nhận được -1'):
        check_int('i', -1, 0)


@pytest.mark.parametrize(
    'bad, kwargs, error, match',
    [
        ('1', {}, TypeError, 'phải là một số'),
        (True, {}, TypeError, 'phải là một số'),
        (math.nan, {}, ValueError, 'hữu hạn'),
        (0.5, {'minimum': 1}, ValueError, '>= 1'),
        (0, {'minimum': 0, 'strict': True}, ValueError, '> 0'),
    ],
)
def test_number_check(bad, kwargs, error, match):
    assert check_number('x', 2.5, **kwargs) == 2.5
    with pytest.raises(error, match=f'tham số `x`.*{match}'):
        check_number('x', bad, **kwargs)


def test_auto_check_resolves_auto_and_checks_the_rest():
    assert check_auto('n', 'auto', check_int, 64) == 64
    assert check_auto('n', ' auto ', check_int, 64) == 64
    assert check_auto('n', 5, check_int, 64) == 5
    with pytest.raises(TypeError, match='tham số `n`'):
        check_auto('n', 'tự động', check_int, 64)


@pytest.mark.parametrize('value', [0.5, 2, 1e-9])
def test_a_positive_number_check_accepts_finite_positive_numbers(value):
    assert check_number('t', value, minimum=0, strict=True) == value  # deadline_s, min_run_time


@pytest.mark.parametrize(
    'bad, error',
    [
        (0, ValueError),
        (-1, ValueError),
        (math.inf, ValueError),
        (math.nan, ValueError),
        (True, TypeError),
        ('1', TypeError),
        (None, TypeError),
    ],
)
def test_a_positive_number_check_refuses_the_rest(bad, error):
    with pytest.raises(error, match='tham số `t`'):
        check_number('t', bad, minimum=0, strict=True)


@pytest.mark.parametrize('value', [(64, 128), [64, 128], '[64, 128]', ' [64,128] '])
def test_int_list_reads_lists_and_papermill_text(value):
    assert check_int_list('sizes', value) == [64, 128]


@pytest.mark.parametrize(
    'bad, error, match',
    [
        ('[-1]', ValueError, 'chỉ nhận số nguyên dương, có phần tử -1'),
        ([0, 2], ValueError, 'phần tử 0'),
        ([1.5], ValueError, 'phần tử 1.5'),
        ([True], ValueError, 'phần tử True'),
        ([], ValueError, 'không được là danh sách rỗng'),
        ('[]', ValueError, 'rỗng'),
        ('abc', TypeError, 'phải là một danh sách số nguyên'),
        (64, TypeError, 'danh sách'),
        (None, TypeError, 'danh sách'),
    ],
)
def test_int_list_refuses_bad_values(bad, error, match):
    with pytest.raises(error, match=match) as info:
        check_int_list('sizes', bad)
    assert '`sizes`' in str(info.value)


@pytest.mark.parametrize(
    'text, short',
    [
        ('/GPU:0', '/GPU:0'),
        ('gpu:1', '/GPU:1'),
        ('/device:CPU:0', '/CPU:0'),
        ('/job:localhost/replica:0/task:0/device:GPU:7', '/GPU:7'),
        ('/physical_device:CPU:0', '/CPU:0'),
    ],
)
def test_device_name_shortens(text, short):
    assert device_name(text) == short


@pytest.mark.parametrize('bad, error', [('', ValueError), ('GPU', ValueError), (5, TypeError)])
def test_device_name_refuses_what_is_not_a_device(bad, error):
    with pytest.raises(error, match='thiết bị'):
        device_name(bad)
