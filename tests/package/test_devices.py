"""d2lhelpers.devices: names, counts, safe fallbacks, logical devices and the environment report.

GPU and no-GPU paths are tested by replacing TensorFlow's device listings with fakes, so the tests
pass with or without a GPU. Splitting devices changes TensorFlow's process-wide configuration, so
the real split, and a script written the way d2l users write code, run in fresh processes (with
GPUs hidden: the CPU path).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import d2lhelpers
from d2lhelpers import (
    Device,
    cpu,
    ensure_devices,
    env_report,
    gpu,
    num_gpus,
    try_all_gpus,
    try_gpu,
)
from d2lhelpers import devices as devices_module
from d2lhelpers.devices import EnvReport


def fake_devices(monkeypatch, gpus: int, physical_gpus: int | None = None) -> None:
    """Make TensorFlow see ``physical_gpus`` physical GPUs split into ``gpus`` logical ones.

    The extra logical GPUs all come from physical GPU 0 (as ``ensure_devices`` splits).
    """
    import tensorflow as tf

    physical_gpus = gpus if physical_gpus is None else physical_gpus
    cpu_dev = tf.config.PhysicalDevice('/physical_device:CPU:0', 'CPU')
    phys = [
        tf.config.PhysicalDevice(f'/physical_device:GPU:{i}', 'GPU') for i in range(physical_gpus)
    ]
    split = {}
    if phys and gpus > physical_gpus:
        split[phys[0].name] = [tf.config.LogicalDeviceConfiguration(2048)] * (
            gpus - physical_gpus + 1
        )
    logical = [tf.config.LogicalDevice('/device:CPU:0', 'CPU')] + [
        tf.config.LogicalDevice(f'/device:GPU:{i}', 'GPU') for i in range(gpus)
    ]

    def lister(devices):
        def list_devices(device_type=None):
            return [d for d in devices if device_type is None or d.device_type == device_type]

        return list_devices

    monkeypatch.setattr(tf.config, 'get_visible_devices', lister([cpu_dev, *phys]))
    monkeypatch.setattr(tf.config, 'list_physical_devices', lister([cpu_dev, *phys]))
    monkeypatch.setattr(tf.config, 'list_logical_devices', lister(logical))
    monkeypatch.setattr(tf.config, 'get_logical_device_configuration', lambda d: split.get(d.name))


# --- names, reprs and d2l's device protocol ----------------------------------------------------


def test_names_and_reprs():
    assert (cpu(), gpu(), gpu(3)) == ('/CPU:0', '/GPU:0', '/GPU:3')
    assert repr([cpu(), gpu(1)]) == '[/CPU:0, /GPU:1]' and f'{cpu()}' == '/CPU:0'


def test_a_device_knows_its_kind():
    assert (cpu().kind, gpu(3).kind, Device('/job:w/replica:0/task:1/device:GPU:12').kind) == (
        'CPU',
        'GPU',
        'GPU',
    )


@pytest.mark.parametrize(
    'bad, error',
    [(-1, ValueError), (1.5, TypeError), ('1', TypeError), (True, TypeError), (None, TypeError)],
)
def test_gpu_and_try_gpu_refuse_a_bad_index(bad, error):
    for fn in (gpu, try_gpu):
        with pytest.raises(error, match='tham số `i`'):
            fn(bad)


def test_try_gpu_checks_the_index_before_counting(monkeypatch):
    monkeypatch.setattr(devices_module, 'num_gpus', lambda: pytest.fail('counted GPUs first'))
    with pytest.raises(ValueError):
        try_gpu(-1)


def test_a_device_carries_the_name_d2l_reads(monkeypatch, tf):
    # d2l's TensorFlow training functions do `tf.distribute.OneDeviceStrategy(device._device_name)`
    fake_devices(monkeypatch, gpus=2)
    assert try_gpu(5)._device_name == '/CPU:0' and gpu(1)._device_name == '/GPU:1'
    strategy = tf.distribute.OneDeviceStrategy(cpu()._device_name)
    assert Device(strategy.extended.worker_devices[0]) == '/CPU:0'


# --- using a device as a context -------------------------------------------------------------


def test_with_device_and_tf_device_place_ops_there(tf):
    with cpu():
        x = tf.constant([1.0]) + 1
    with tf.device(cpu()):
        y = tf.ones(2)
    assert Device(x.device) == Device(y.device) == cpu()


# --- counting and falling back ---------------------------------------------------------------


def test_without_gpu_everything_falls_back_to_the_cpu(monkeypatch):
    fake_devices(monkeypatch, gpus=0)
    assert (num_gpus(), try_gpu(), try_gpu(3), try_all_gpus()) == (0, cpu(), cpu(), [cpu()])


def test_a_split_gpu_counts_as_its_logical_gpus(monkeypatch):
    fake_devices(monkeypatch, gpus=2, physical_gpus=1)
    assert num_gpus() == 2
    assert (try_gpu(1), try_gpu(2), try_all_gpus()) == ('/GPU:1', cpu(), ['/GPU:0', '/GPU:1'])
    assert isinstance(try_gpu(1), Device)


def test_several_physical_gpus(monkeypatch):
    fake_devices(monkeypatch, gpus=4)
    assert num_gpus() == 4 and try_gpu(3) == '/GPU:3' and try_gpu(4) == cpu()


# --- ensure_devices: logic (in process, nothing is split here) -----------------------------------


@pytest.mark.parametrize(
    'kwargs, error, match',
    [
        ({'n': 0}, ValueError, '`n`'),
        ({'n': 1.5}, TypeError, '`n`'),
        ({'n': True}, TypeError, '`n`'),
        ({'n': 2, 'need_bytes': -1}, ValueError, '`need_bytes`'),
        ({'n': 2, 'need_bytes': '1 GB'}, TypeError, '`need_bytes`'),
    ],
)
def test_ensure_devices_refuses_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        ensure_devices(**kwargs)


@pytest.mark.parametrize(
    ('need_bytes', 'limit'),
    [(0, 1024), (2**28, 1024), (864e6, 2304), (2 * 2**30, 4608)],
)
def test_ensure_devices_sizes_a_split_gpu_from_what_it_must_hold(
    monkeypatch, tf, need_bytes, limit
):
    fake_devices(monkeypatch, gpus=1)
    calls = []
    monkeypatch.setattr(
        tf.config, 'set_logical_device_configuration', lambda dev, configs: calls.append(configs)
    )
    ensure_devices(2, need_bytes=need_bytes)
    assert [c.memory_limit for c in calls[0]] == [limit, limit]
    assert limit * 2**20 >= 2 * need_bytes + 2**29 and limit % 256 == 0


def test_ensure_devices_uses_what_exists_without_a_word(monkeypatch, capsys):
    fake_devices(monkeypatch, gpus=0)
    assert ensure_devices(1) == ['/CPU:0']
    fake_devices(monkeypatch, gpus=2)
    assert ensure_devices(2) == ['/GPU:0', '/GPU:1']
    assert capsys.readouterr().out == ''


def test_ensure_devices_splits_one_gpu_with_memory_limit(monkeypatch, capsys, tf):
    fake_devices(monkeypatch, gpus=1)
    calls = []
    monkeypatch.setattr(
        tf.config,
        'set_logical_device_configuration',
        lambda dev, configs: calls.append((dev.name, configs)),
    )
    assert ensure_devices(2) == ['/GPU:0', '/GPU:1']
    ((name, configs),) = calls
    assert name == '/physical_device:GPU:0'
    assert [c.memory_limit for c in configs] == [2048, 2048]  # nothing said: 2048 MB each
    assert 'đã chia GPU:0 thành 2 thiết bị logic' in capsys.readouterr().out


# --- in fresh processes: the real split, and code written the d2l way ---------------------------

SCRIPT = textwrap.dedent("""
    import contextlib, io, json
    out = {}

    def run(key, fn, *args):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            try:
                value = fn(*args)
                out[key] = [str(d) for d in value] if isinstance(value, list) else str(value)
            except Exception as err:
                out[key] = f'{type(err).__name__}: {err}'
        out[key + '_printed'] = buf.getvalue()

    from d2lhelpers import benchmark, ensure_devices, env_report, num_gpus, try_all_gpus, try_gpu
    import tensorflow as tf

    # d2l-style code first: none of it may lock TensorFlow's devices
    run('try_gpu', try_gpu)
    run('try_all_gpus', try_all_gpus)
    run('num_gpus', num_gpus)
    run('first', ensure_devices, 2)
    run('logical_cpus', lambda: [d.name for d in tf.config.list_logical_devices('CPU')])
    with tf.device(out['first'][1]):
        out['op_device'] = (tf.constant(1.0) + 1).device
    # `with device:` nested (the same device, another one) and used again, on two CPUs
    from d2lhelpers import Device
    cpu0, cpu1 = map(Device, out['first'])
    with cpu1:
        with cpu1:
            a = tf.ones(1)
        with cpu0:
            b = tf.ones(1)
        c = tf.ones(1)
    with cpu1:
        d = tf.ones(1)
    out['nested'] = [str(Device(t.device)) for t in (a, b, c, d, tf.ones(1))]
    run('again', ensure_devices, 2)
    run('fewer', ensure_devices, 1)
    run('larger', ensure_devices, 3)
    # benchmark's device syncs, on TensorFlow's real devices (split into two logical CPUs)
    r = benchmark(lambda: tf.reduce_sum(tf.ones((64, 64))), repeats=3, number=2)
    out['timer'] = [len(r.times), r.number, r.median > 0]
    print(json.dumps(out))
""")


@pytest.fixture(scope='module')
def fresh_run():
    env = {**os.environ, 'CUDA_VISIBLE_DEVICES': '-1'}  # the CPU path, on any machine
    proc = subprocess.run(
        [sys.executable, '-c', SCRIPT], capture_output=True, text=True, env=env, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_d2l_style_calls_before_ensure_devices_do_not_lock_the_devices(fresh_run):
    assert (fresh_run['try_gpu'], fresh_run['try_all_gpus'], fresh_run['num_gpus']) == (
        '/CPU:0',
        ['/CPU:0'],
        '0',
    )
    assert fresh_run['first'] == ['/CPU:0', '/CPU:1']


def test_ensure_devices_splits_the_cpu_and_says_so(fresh_run):
    assert fresh_run['logical_cpus'] == ['/device:CPU:0', '/device:CPU:1']
    assert 'đã chia CPU:0 thành 2 thiết bị logic' in fresh_run['first_printed']
    assert fresh_run['op_device'].endswith('CPU:1')


def test_ensure_devices_again_returns_the_same_devices_silently(fresh_run):
    assert fresh_run['again'] == ['/CPU:0', '/CPU:1'] and fresh_run['again_printed'] == ''
    assert fresh_run['fewer'] == ['/CPU:0']


def test_ensure_devices_too_late_says_what_to_call_first(fresh_run):
    message = fresh_run['larger']
    assert message.startswith('RuntimeError: không chia được CPU:0 thành 3 thiết bị logic')
    assert 'env_report()' in message and '`with try_gpu():`' in message
    assert 'khởi động lại kernel' in message


def test_with_device_can_be_nested_and_reused(fresh_run):
    """Two CPUs here: a ``with`` that placed nothing would leave every op on /CPU:0."""
    assert fresh_run['nested'] == ['/CPU:1', '/CPU:0', '/CPU:1', '/CPU:1', '/CPU:0']


def test_benchmark_syncs_real_devices(fresh_run):
    assert fresh_run['timer'] == [3, 2, True]


# --- env_report ------------------------------------------------------------------------------


def test_env_report_without_gpu(monkeypatch, tf):
    fake_devices(monkeypatch, gpus=0)
    report = env_report()
    text = str(report)
    assert 'TensorFlow ' + tf.__version__ in text and 'không tìm thấy GPU' in text
    assert 'TF32 cho phép nhân float32' in text and isinstance(report, EnvReport)
    assert json.loads(json.dumps(report.as_dict()))['tensorflow'] == tf.__version__


def test_env_report_shows_as_text_in_ipython():
    """A notebook cell ending in ``env_report()`` shows IPython's plain-text form of the value:
    the report's text, not a dataclass repr."""
    from IPython.core.formatters import PlainTextFormatter

    report = EnvReport(
        tensorflow='2.21.0',
        keras='3.15.1',
        numpy='2.4.6',
        built_with_cuda=False,
        cuda=None,
        cudnn=None,
        physical=['/CPU:0'],
        logical=['/CPU:0'],
        tf32=False,
    )
    shown = PlainTextFormatter()(report)
    assert shown == str(report) and shown.startswith('TensorFlow 2.21.0, Keras 3.15.1')


def test_env_report_maps_split_logical_gpus_to_their_physical_gpu(monkeypatch, tf):
    """Physical GPU 0 split in two (2048 MB each), physical GPU 1 whole."""
    fake_devices(monkeypatch, gpus=3, physical_gpus=2)
    monkeypatch.setattr(
        tf.config.experimental,
        'get_device_details',
        lambda dev: {'device_name': f'GPU model {dev.name[-1]}', 'compute_capability': (7, 5)},
    )
    rows = [
        {'name': 'GPU model 1', 'memory.total': '40960', 'driver_version': '580.65.06'},
        {'name': 'GPU model 0', 'memory.total': '15360', 'driver_version': '580.65.06'},
    ]
    monkeypatch.setattr(devices_module, 'smi_rows', lambda: rows)
    report = env_report()
    assert [
        (g.device, g.name, g.physical, g.memory_total_mb, g.memory_limit_mb) for g in report.gpus
    ] == [
        ('/GPU:0', 'GPU model 0', 0, 15360, 2048),
        ('/GPU:1', 'GPU model 0', 0, 15360, 2048),
        ('/GPU:2', 'GPU model 1', 1, 40960, None),
    ]
    lines = str(report).splitlines()
    assert lines[-3].endswith('GPU vật lý 0 (15360 MB), thiết bị logic giới hạn 2048 MB')
    assert 'giới hạn' not in lines[-1]
    assert json.loads(json.dumps(report.as_dict()))['gpus'][2]['memory_total_mb'] == 40960


ROWS = [
    {'name': 'NVIDIA A100-SXM4-40GB', 'memory.total': '40960', 'driver_version': '580.65.06'},
    {'name': 'Tesla T4', 'memory.total': '15360', 'driver_version': '580.65.06'},
    {'name': 'Tesla T4', 'memory.total': '16384', 'driver_version': '580.65.06'},
    {'name': 'NVIDIA L4', 'memory.total': '23034', 'driver_version': '580.65.06'},
    {'name': 'NVIDIA L4', 'memory.total': '23034', 'driver_version': '580.65.06'},
    {'name': 'NVIDIA H100 80GB HBM3', 'memory.total': '[N/A]', 'driver_version': '580.65.06'},
]


@pytest.mark.parametrize(
    'name, total',
    [
        ('NVIDIA A100-SXM4-40GB', 40960.0),  # the one GPU of that name, wherever it sits
        ('NVIDIA L4', 23034.0),  # two of one model, one memory size
        ('Tesla T4', None),  # two T4s with different memory: which one is not known, so none
        ('NVIDIA H100 80GB HBM3', None),  # nvidia-smi printed no number
        ('Quadro', None),  # not in nvidia-smi's list
        (None, None),
    ],
)
def test_memory_total_pairs_by_name_only_when_certain(name, total):
    assert devices_module._memory_total_mb(name, ROWS) == total


def test_ensure_devices_turns_on_memory_growth_on_gpus_it_does_not_split(monkeypatch, tf):
    fake_devices(monkeypatch, gpus=3)
    grown = []
    monkeypatch.setattr(
        tf.config.experimental, 'set_memory_growth', lambda dev, on: grown.append((dev.name, on))
    )
    assert ensure_devices(1) == ['/GPU:0']
    assert [name for name, on in grown if on] == [f'/physical_device:GPU:{i}' for i in range(3)]


def test_ensure_devices_refuses_another_memory_limit_once_split(monkeypatch):
    fake_devices(monkeypatch, gpus=2, physical_gpus=1)  # GPU:0 split, 2048 MB each
    assert ensure_devices(2) == ['/GPU:0', '/GPU:1']
    with pytest.raises(RuntimeError, match='không đổi được thành 2560 MB'):
        ensure_devices(2, need_bytes=2**30)


# --- the package -----------------------------------------------------------------------------


def test_all_lists_every_public_name_once_and_each_has_a_docstring():
    assert len(set(d2lhelpers.__all__)) == len(d2lhelpers.__all__)
    public = {n for n in vars(d2lhelpers) if not n.startswith('_') and n != 'annotations'}
    modules = {n for n in public if type(getattr(d2lhelpers, n)).__name__ == 'module'}
    assert public - modules == set(d2lhelpers.__all__)
    for name in d2lhelpers.__all__:
        value = getattr(d2lhelpers, name)
        assert isinstance(value, (float, tuple)) or value.__doc__, name


def test_importing_the_package_imports_no_tensorflow_and_no_maintainer_tool():
    code = (
        'import sys, d2lhelpers; '
        "print(sorted({'tensorflow', 'keras', 'papermill', 'psutil', 'nbformat', 'yaml'} "
        '& set(sys.modules)))'
    )
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == '[]'


def test_no_formatter_or_linter_exemption_in_the_package_or_the_notebooks():
    """A size limit is met by removing code, never by packing it (CONTRIBUTING)."""
    root = Path(__file__).resolve().parents[2]
    files = [*root.glob('d2lhelpers/**/*.py'), *root.glob('notebooks/*.ipynb')]
    files += root.glob('exercises/*.ipynb')
    exempt = re.compile(r'fmt: ?(?:off|skip)|noqa')
    bad = [str(p.relative_to(root)) for p in files if exempt.search(p.read_text(encoding='utf-8'))]
    assert len(files) > 9 and not bad, bad


def test_the_package_stays_within_its_line_budget():
    """At most 1,500 lines in ``d2lhelpers/`` as ``ruff format`` writes them (``make test`` checks
    the format), met by removal, never by packing (CONTRIBUTING)."""
    root = Path(__file__).resolve().parents[2]
    files = sorted(root.glob('d2lhelpers/*.py'))
    lines = sum(len(p.read_text(encoding='utf-8').splitlines()) for p in files)
    assert len(files) > 5 and lines <= 1500, f'd2lhelpers/ có {lines} dòng (giới hạn 1500)'
