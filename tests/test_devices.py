"""d2lhelpers.devices: names, counts, safe fallbacks, logical devices and the environment report.

GPU and no-GPU paths are tested by replacing TensorFlow's device listings with fakes, so the tests
pass with or without a GPU. Splitting devices changes TensorFlow's process-wide configuration, so the
real split runs in one subprocess (with GPUs hidden: the CPU path).
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import textwrap

import pytest
import tensorflow as tf

import d2lhelpers
from d2lhelpers import (
    Device,
    EnvReport,
    cpu,
    ensure_devices,
    env_report,
    gpu,
    num_gpus,
    try_all_gpus,
    try_gpu,
)
from d2lhelpers import devices as devices_module


def fake_devices(monkeypatch, gpus: int, physical_gpus: int | None = None) -> None:
    """Make TensorFlow list ``gpus`` logical and ``physical_gpus`` physical GPUs besides the CPU."""
    physical_gpus = gpus if physical_gpus is None else physical_gpus
    logical = {
        'CPU': [tf.config.LogicalDevice('/device:CPU:0', 'CPU')],
        'GPU': [tf.config.LogicalDevice(f'/device:GPU:{i}', 'GPU') for i in range(gpus)],
    }
    physical = {
        'CPU': [tf.config.PhysicalDevice('/physical_device:CPU:0', 'CPU')],
        'GPU': [
            tf.config.PhysicalDevice(f'/physical_device:GPU:{i}', 'GPU')
            for i in range(physical_gpus)
        ],
    }

    def lister(table):
        def list_devices(device_type=None):
            if device_type is None:
                return table['CPU'] + table['GPU']
            return list(table.get(device_type.upper(), []))

        return list_devices

    monkeypatch.setattr(tf.config, 'list_logical_devices', lister(logical))
    monkeypatch.setattr(tf.config, 'list_physical_devices', lister(physical))


# --- names and reprs -------------------------------------------------------------------------


def test_cpu_is_named_cpu0():
    assert cpu() == '/CPU:0'


def test_gpu_default_and_index():
    assert (gpu(), gpu(3)) == ('/GPU:0', '/GPU:3')


def test_repr_is_the_device_name():
    assert repr(gpu(1)) == '/GPU:1' and f'{cpu()}' == '/CPU:0'


def test_repr_of_a_list_is_readable():
    assert repr([cpu(), gpu()]) == '[/CPU:0, /GPU:0]'


def test_device_normalises_long_names():
    assert Device('/job:localhost/replica:0/task:0/device:CPU:0') == '/CPU:0'


def test_device_rejects_a_non_string():
    with pytest.raises(TypeError, match='device name'):
        Device(5)


def test_device_rejects_an_empty_name():
    with pytest.raises(ValueError, match='not a device name'):
        Device('')


@pytest.mark.parametrize('bad', [-2, -1])
def test_gpu_negative_index_is_a_value_error(bad):
    with pytest.raises(ValueError, match='`i`'):
        gpu(bad)


@pytest.mark.parametrize('bad', [1.5, '1', True, None])
def test_gpu_non_int_index_is_a_type_error(bad):
    with pytest.raises(TypeError, match='`i`'):
        gpu(bad)


# --- using a device as a context -------------------------------------------------------------


def test_with_device_places_ops_there():
    with cpu():
        x = tf.constant([1.0]) + 1
    assert x.device.endswith('CPU:0')


def test_tf_device_accepts_a_device():
    with tf.device(cpu()):
        x = tf.ones(2)
    assert x.device.endswith('CPU:0')


def test_with_device_can_be_nested_and_reused():
    d = cpu()
    with d:
        with d:
            x = tf.ones(1)
        y = tf.ones(1)
    with d:
        z = tf.ones(1)
    assert all(t.device.endswith('CPU:0') for t in (x, y, z))


def test_with_try_gpu_works_without_a_gpu(monkeypatch):
    fake_devices(monkeypatch, gpus=0)
    with try_gpu():
        x = tf.ones((2, 3))
    assert x.device.endswith('CPU:0')


# --- counting and falling back ---------------------------------------------------------------


def test_num_gpus_matches_tensorflow_on_this_machine():
    assert num_gpus() == len(tf.config.list_logical_devices('GPU'))


def test_num_gpus_without_gpu_is_zero(monkeypatch):
    fake_devices(monkeypatch, gpus=0)
    assert num_gpus() == 0


def test_try_gpu_falls_back_to_cpu(monkeypatch):
    fake_devices(monkeypatch, gpus=0)
    assert try_gpu() == cpu() and try_gpu(3) == cpu()


def test_try_all_gpus_without_gpu_is_cpu_list(monkeypatch):
    fake_devices(monkeypatch, gpus=0)
    assert try_all_gpus() == [cpu()]


def test_num_gpus_counts_logical_gpus(monkeypatch):
    fake_devices(monkeypatch, gpus=2, physical_gpus=1)
    assert num_gpus() == 2


def test_try_gpu_returns_an_existing_gpu(monkeypatch):
    fake_devices(monkeypatch, gpus=2, physical_gpus=1)
    assert try_gpu(1) == '/GPU:1' and isinstance(try_gpu(1), Device)


def test_try_gpu_past_the_last_gpu_is_cpu(monkeypatch):
    fake_devices(monkeypatch, gpus=2)
    assert try_gpu(2) == cpu()


def test_try_all_gpus_lists_logical_gpus(monkeypatch):
    fake_devices(monkeypatch, gpus=2, physical_gpus=1)
    assert try_all_gpus() == ['/GPU:0', '/GPU:1']


def test_try_gpu_negative_is_a_value_error():
    with pytest.raises(ValueError, match='`i` must be >= 0'):
        try_gpu(-1)


@pytest.mark.parametrize('bad', [1.5, '1', True])
def test_try_gpu_non_int_is_a_type_error(bad):
    with pytest.raises(TypeError, match='`i` must be an int'):
        try_gpu(bad)


# --- ensure_devices: logic (in process, nothing is split here) -----------------------------------


@pytest.mark.parametrize('bad', [0, -1])
def test_ensure_devices_n_below_one_is_a_value_error(bad):
    with pytest.raises(ValueError, match='`n`'):
        ensure_devices(bad)


@pytest.mark.parametrize('bad', [1.5, '2', True])
def test_ensure_devices_non_int_n_is_a_type_error(bad):
    with pytest.raises(TypeError, match='`n`'):
        ensure_devices(bad)


def test_ensure_devices_zero_memory_limit_is_a_value_error():
    with pytest.raises(ValueError, match='`memory_limit_mb`'):
        ensure_devices(2, memory_limit_mb=0)


def test_ensure_devices_non_int_memory_limit_is_a_type_error():
    with pytest.raises(TypeError, match='`memory_limit_mb`'):
        ensure_devices(2, memory_limit_mb=1.5)


def test_ensure_devices_one_cpu_needs_no_split(monkeypatch, capsys):
    fake_devices(monkeypatch, gpus=0)
    assert ensure_devices(1) == ['/CPU:0'] and capsys.readouterr().out == ''


def test_ensure_devices_uses_existing_gpus(monkeypatch, capsys):
    fake_devices(monkeypatch, gpus=2)
    assert ensure_devices(2) == ['/GPU:0', '/GPU:1'] and capsys.readouterr().out == ''


def test_ensure_devices_splits_one_gpu_with_memory_limit(monkeypatch, capsys):
    fake_devices(monkeypatch, gpus=1)
    calls = []
    monkeypatch.setattr(tf.config, 'get_logical_device_configuration', lambda dev: None)
    monkeypatch.setattr(
        tf.config,
        'set_logical_device_configuration',
        lambda dev, configs: calls.append((dev.name, configs)),
    )
    devices = ensure_devices(2, memory_limit_mb=1024)
    assert devices == ['/GPU:0', '/GPU:1']
    ((name, configs),) = calls
    assert name == '/physical_device:GPU:0'
    assert [c.memory_limit for c in configs] == [1024, 1024]
    assert 'GPU:0' in capsys.readouterr().out


def test_ensure_devices_after_runtime_start_is_a_clear_runtime_error():
    tf.constant(0.0)  # the runtime of this process has started (if no test had started it yet)
    with pytest.raises(RuntimeError, match='before any other TensorFlow op'):
        ensure_devices(2)


# --- ensure_devices: real split, in a fresh process ----------------------------------------------

SPLIT_SCRIPT = textwrap.dedent("""
    import contextlib, io, json
    from d2lhelpers import ensure_devices
    import tensorflow as tf

    def quietly(fn, *args):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            try:
                return [str(d) for d in fn(*args)], buf.getvalue()
            except RuntimeError as err:
                return 'RuntimeError: ' + str(err), buf.getvalue()

    out = {}
    out['first'], out['first_note'] = quietly(ensure_devices, 2)
    out['logical_cpus'] = [d.name for d in tf.config.list_logical_devices('CPU')]
    with tf.device(out['first'][1]):
        out['op_device'] = (tf.constant(1.0) + 1).device
    out['again'], out['again_note'] = quietly(ensure_devices, 2)
    out['fewer'], _ = quietly(ensure_devices, 1)
    out['larger'], _ = quietly(ensure_devices, 3)
    print(json.dumps(out))
""")


@pytest.fixture(scope='module')
def split_run(quiet_env):
    env = {**quiet_env, 'CUDA_VISIBLE_DEVICES': '-1'}  # the CPU path, on any machine
    proc = subprocess.run(
        [sys.executable, '-c', SPLIT_SCRIPT], capture_output=True, text=True, env=env, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_ensure_devices_splits_the_cpu(split_run):
    assert split_run['first'] == ['/CPU:0', '/CPU:1']


def test_ensure_devices_creates_logical_cpus(split_run):
    assert split_run['logical_cpus'] == ['/device:CPU:0', '/device:CPU:1']


def test_ensure_devices_says_that_it_split(split_run):
    note = split_run['first_note']
    assert 'thiết bị logic' in note and 'CPU:0' in note and '2' in note


def test_ops_run_on_the_second_logical_cpu(split_run):
    assert split_run['op_device'].endswith('CPU:1')


def test_ensure_devices_again_with_same_n_is_silent(split_run):
    assert split_run['again'] == ['/CPU:0', '/CPU:1'] and split_run['again_note'] == ''


def test_ensure_devices_again_with_smaller_n(split_run):
    assert split_run['fewer'] == ['/CPU:0']


def test_ensure_devices_larger_n_after_start_is_a_clear_runtime_error(split_run):
    assert split_run['larger'].startswith('RuntimeError: cannot split')
    assert 'restart the kernel' in split_run['larger']


# --- env_report ------------------------------------------------------------------------------


def test_env_report_without_gpu(monkeypatch):
    fake_devices(monkeypatch, gpus=0)
    text = str(env_report())
    assert 'TensorFlow ' + tf.__version__ in text and 'không tìm thấy GPU' in text
    assert '/CPU:0' in text


def test_env_report_is_json_ready():
    report = env_report()
    assert isinstance(report, EnvReport)
    assert json.loads(json.dumps(report.as_dict()))['tensorflow'] == tf.__version__


def test_env_report_shows_as_text_in_ipython():
    class Printer:
        text_ = ''

        def text(self, s):
            self.text_ += s

    p = Printer()
    report = env_report()
    report._repr_pretty_(p, False)
    assert p.text_ == str(report)


def test_env_report_with_fake_gpus(monkeypatch):
    fake_devices(monkeypatch, gpus=2, physical_gpus=1)  # Colab: one T4 split in two
    monkeypatch.setattr(
        tf.config,
        'get_logical_device_configuration',
        lambda dev: [tf.config.LogicalDeviceConfiguration(2048)] * 2,
    )
    monkeypatch.setattr(
        tf.config.experimental,
        'get_memory_info',
        lambda name: {'current': 3 * 2**20, 'peak': 5 * 2**20},
    )
    monkeypatch.setattr(
        tf.config.experimental,
        'get_device_details',
        lambda dev: {'device_name': 'Tesla T4', 'compute_capability': (7, 5)},
    )
    monkeypatch.setattr(devices_module, '_nvidia_smi_memory', lambda: ['15360 MiB'])
    report = env_report()
    text = str(report)
    assert [g['device'] for g in report.gpus] == ['/GPU:0', '/GPU:1']
    assert 'Tesla T4' in text and '7.5' in text and '15360 MiB' in text
    assert [g['memory_total'] for g in report.gpus] == ['15360 MiB', '15360 MiB']
    assert 'TF đang dùng 3 MB (đỉnh 5 MB)' in text


def test_env_report_maps_split_logical_gpus_to_their_physical_gpu(monkeypatch):
    """Physical GPU 0 split in two, physical GPU 1 whole: /GPU:1 is still on physical GPU 0."""
    fake_devices(monkeypatch, gpus=3, physical_gpus=2)
    splits = {'/physical_device:GPU:0': [tf.config.LogicalDeviceConfiguration(1024)] * 2}
    monkeypatch.setattr(
        tf.config, 'get_logical_device_configuration', lambda dev: splits.get(dev.name)
    )
    monkeypatch.setattr(
        tf.config.experimental, 'get_memory_info', lambda name: {'current': 0, 'peak': 0}
    )
    monkeypatch.setattr(
        tf.config.experimental,
        'get_device_details',
        lambda dev: {'device_name': f'GPU model {dev.name[-1]}'},
    )
    monkeypatch.setattr(devices_module, '_nvidia_smi_memory', lambda: ['15360 MiB', '40960 MiB'])
    report = env_report()
    assert [(g['name'], g['memory_total']) for g in report.gpus] == [
        ('GPU model 0', '15360 MiB'),
        ('GPU model 0', '15360 MiB'),
        ('GPU model 1', '40960 MiB'),
    ]


# --- the package -----------------------------------------------------------------------------


def test_every_public_name_resolves_and_has_a_docstring():
    for name in d2lhelpers.__all__:
        assert getattr(d2lhelpers, name).__doc__, name


def test_every_helper_module_says_which_notebook_teaches_it():
    for module in ('devices', 'timing', 'params'):
        assert 'Taught in' in importlib.import_module(f'd2lhelpers.{module}').__doc__, module


def test_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match='no_such_helper'):
        d2lhelpers.no_such_helper  # noqa: B018


def test_import_has_no_side_effects(quiet_env):
    code = (
        'import sys, d2lhelpers, d2lhelpers.params; '
        'print("tensorflow" in sys.modules, "keras" in sys.modules)'
    )
    out = subprocess.run(
        [sys.executable, '-c', code],
        capture_output=True,
        text=True,
        env=quiet_env,
        timeout=60,
        check=True,
    ).stdout
    assert out.split() == ['False', 'False']
