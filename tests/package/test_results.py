"""d2lhelpers.results: save_results, atomic_write and the JSON of measurements (TF-free)."""

from __future__ import annotations

import json
import math
import os
import stat
import subprocess
import sys

import numpy as np
import pytest

from d2lhelpers import BenchmarkResult, EnvReport, atomic_write, format_seconds, save_results


@pytest.mark.parametrize(
    'seconds, text', [(1.5, '1.500 s'), (0.0123456, '12.346 ms'), (0.0000123, '12.3 µs')]
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
    data = save_results({'mm': BenchmarkResult(times=(1.0, 3.0), flops=4e9, number=2)}, None)
    assert data['mm'] == {
        'label': '',
        'median_s': 2.0,
        'iqr_s': 1.0,
        'runs': 2,
        'number': 2,
        'min_s': 1.0,
        'max_s': 3.0,
        'overhead_s': None,
        'gflops': 2.0,
        'gbs': None,
    }


@pytest.mark.parametrize('bad, match', [(5, '`results_path`'), ('', '`results_path`')])
def test_save_results_bad_path(bad, match):
    with pytest.raises(TypeError, match=match):
        save_results({'v': 1}, bad)


def test_save_results_non_dict():
    with pytest.raises(TypeError, match='`results` phải là một dict'):
        save_results([1, 2], None)


def test_atomic_write_failure_keeps_the_old_file_and_leaves_nothing(tmp_path, monkeypatch):
    path = tmp_path / 'r.json'
    atomic_write(path, 'old')

    def broken_replace(src, dst):
        raise OSError('disk full')

    monkeypatch.setattr(os, 'replace', broken_replace)
    with pytest.raises(OSError, match='disk full'):
        atomic_write(path, 'new')
    assert path.read_text() == 'old'
    assert [p.name for p in tmp_path.iterdir()] == ['r.json']


def test_atomic_write_keeps_permissions_and_respects_the_umask(tmp_path):
    kept = tmp_path / 'kept.txt'
    kept.write_text('x')
    kept.chmod(0o640)
    atomic_write(kept, b'bytes')
    assert kept.read_bytes() == b'bytes' and stat.S_IMODE(kept.stat().st_mode) == 0o640
    old = os.umask(0o027)
    try:
        atomic_write(tmp_path / 'new.txt', 'x')
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / 'new.txt').stat().st_mode) == 0o640


def test_env_report_text_without_and_with_a_split_gpu():
    cpu = EnvReport(
        '2.21.0', '3.15.1', '2.4.6', False, None, None, ['/CPU:0'], ['/CPU:0', '/CPU:1'], tf32=False
    )
    assert str(cpu).splitlines()[-2:] == [
        'TF32 cho phép nhân float32 (chỉ GPU từ Ampere trở lên): tắt',
        'GPU: không tìm thấy GPU nào',
    ]
    gpu = {
        'device': '/GPU:1',
        'name': 'Tesla T4',
        'compute_capability': '7.5',
        'physical': 0,
        'memory_total': '15360 MiB',
        'memory_limit_mb': 2048,
        'memory_current_mb': 3.0,
        'memory_peak_mb': 5.0,
    }
    report = EnvReport(
        '2.21.0',
        '3.15.1',
        '2.4.6',
        True,
        '12.5.1',
        '9',
        ['/CPU:0', '/GPU:0'],
        ['/CPU:0', '/GPU:0', '/GPU:1'],
        tf32=True,
        gpus=[gpu],
    )
    assert str(report).splitlines()[-1] == (
        '/GPU:1: Tesla T4, compute capability 7.5, GPU vật lý 0 (15360 MiB), '
        'thiết bị logic giới hạn 2048 MB, TF đang dùng 3 MB (đỉnh 5 MB)'
    )


def test_the_tf_free_modules_do_not_import_tensorflow():
    code = (
        'import sys, d2lhelpers; '
        'from d2lhelpers import check_int_list, save_results, BenchmarkResult, DATASHEETS, '
        'run_workers; import d2lhelpers.kernel; '
        'print("tensorflow" in sys.modules, "keras" in sys.modules)'
    )
    out = subprocess.run(
        [sys.executable, '-c', code], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert out.split() == ['False', 'False']
