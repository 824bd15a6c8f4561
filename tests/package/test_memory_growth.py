"""Memory growth after the device set-up of use-gpu and of ``ensure_devices``, on one and two GPUs.

TensorFlow 2.21 hands its GPU options to the runtime when the runtime starts; the eager context
computes them (``Context._compute_device_options`` in ``tensorflow/python/eager/context.py``).
Once any physical device has a logical-device configuration, the CPU included, it leaves
``allow_growth`` unset on every GPU. The set-up use-gpu committed at ec983d5 asked for growth on
every GPU and then split the CPU: growth was silently off on every GPU machine.

Each test makes a fresh eager context TensorFlow's own, whose physical devices are this machine's
CPU and one or two fake GPUs, runs a set-up and reads the options the runtime would be given. The
runtime never starts, so no GPU is needed and each case takes milliseconds. Not yet seen on a GPU.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from d2lhelpers import ensure_devices

NOTEBOOK = Path(__file__).resolve().parents[2] / 'notebooks' / 'use-gpu.ipynb'

# The device set-up cell of notebooks/use-gpu.ipynb at ec983d5, as it was.
SETUP_AT_EC983D5 = """\
gpus = tf.config.list_physical_devices('GPU')  # máy không có GPU: danh sách rỗng
for g in gpus:
    tf.config.experimental.set_memory_growth(g, True)
cpu0 = tf.config.list_physical_devices('CPU')[0]
tf.config.set_logical_device_configuration(cpu0, [tf.config.LogicalDeviceConfiguration()] * 2)
split = tf.config.get_logical_device_configuration(cpu0)  # chỉ đọc cấu hình: runtime chưa chạy
print(f'{len(gpus)} GPU vật lý; {cpu0.name} được chia thành {len(split)} CPU logic')
"""


@pytest.fixture
def machine(tf, monkeypatch):
    """``machine(n)``: a fresh eager context, TensorFlow's own for this test, that sees this
    machine's CPU and ``n`` fake physical GPUs (real GPUs, if any, are left out)."""
    from tensorflow.python.eager import context

    def make(n_gpus: int):
        ctx = context.Context()
        monkeypatch.setattr(context, '_context', ctx)
        ctx._initialize_physical_devices()
        cpus = [d for d in ctx._physical_devices if d.device_type == 'CPU']
        gpus = [
            context.PhysicalDevice(name=f'/physical_device:GPU:{i}', device_type='GPU')
            for i in range(n_gpus)
        ]
        ctx._physical_devices = cpus + gpus
        ctx._physical_device_to_index = {d: i for i, d in enumerate(ctx._physical_devices)}
        ctx._visible_device_list = list(ctx._physical_devices)
        ctx._memory_growth_map = dict.fromkeys(gpus)
        ctx._pluggable_devices = []
        return ctx

    return make


def runtime_config(ctx):
    """The ConfigProto the runtime would start with (reading it starts nothing)."""
    assert ctx._context_handle is None, 'the runtime started'
    return ctx.config


def split_of(options) -> list[list[float]]:
    """The memory limits (MB) of each visible GPU's logical devices; [] for a GPU not split."""
    return [list(v.memory_limit_mb) for v in options.experimental.virtual_devices]


def notebook_setup(notebook: Path) -> tuple[str, str]:
    """The notebook's device set-up cell (the one code cell calling ``set_memory_growth``) and
    the ``devices = ensure_devices(...)`` line of a code cell after it."""
    cells = json.loads(notebook.read_text(encoding='utf-8'))['cells']
    code = [''.join(c['source']) for c in cells if c['cell_type'] == 'code']
    setup = [i for i, source in enumerate(code) if 'set_memory_growth(' in source]
    assert len(setup) == 1, 'one code cell asks for memory growth'
    later = '\n'.join(code[setup[0] + 1 :])
    devices = re.search(r'^devices = ensure_devices\(\d+\)', later, re.MULTILINE)
    assert devices, 'a later cell calls devices = ensure_devices(n)'
    return code[setup[0]], devices.group()


@pytest.mark.parametrize('n_gpus', [1, 2])
def test_ensure_devices_1_grows_every_gpu(machine, n_gpus, tf):
    ctx = machine(n_gpus)
    assert ensure_devices(1) == ['/GPU:0']
    config = runtime_config(ctx)
    assert config.gpu_options.allow_growth and split_of(config.gpu_options) == []
    assert config.device_count['GPU'] == n_gpus and config.device_count['CPU'] == 1


def test_ensure_devices_2_on_two_gpus_splits_nothing_and_grows_both(machine):
    ctx = machine(2)
    assert ensure_devices(2) == ['/GPU:0', '/GPU:1']
    options = runtime_config(ctx).gpu_options
    assert options.allow_growth and split_of(options) == []
    assert options.visible_device_list == '0,1'


def test_ensure_devices_2_on_one_gpu_splits_it_and_drops_growth(machine, tf, capsys):
    """The rule, documented in ``ensure_devices`` and in use-gpu: a GPU split into logical GPUs
    has their memory limits instead of growth."""
    ctx = machine(1)
    gpu = tf.config.list_physical_devices('GPU')[0]
    tf.config.experimental.set_memory_growth(gpu, True)  # asked for first, as use-gpu does
    assert ensure_devices(2) == ['/GPU:0', '/GPU:1']
    assert 'đã chia GPU:0 thành 2 thiết bị logic' in capsys.readouterr().out
    options = runtime_config(ctx).gpu_options
    assert not options.allow_growth
    assert split_of(options) == [[2048, 2048]]


@pytest.mark.parametrize('n_gpus', [1, 2])
def test_the_notebooks_setup_cell_keeps_growth_on_every_gpu(machine, n_gpus, tf):
    ctx = machine(n_gpus)
    setup, _ = notebook_setup(NOTEBOOK)
    exec(setup, {'tf': tf})
    config = runtime_config(ctx)
    assert config.gpu_options.allow_growth, 'the set-up cell turns memory growth off'
    assert split_of(config.gpu_options) == [] and config.device_count['CPU'] == 1


def test_the_notebooks_setup_splits_the_cpu_when_there_is_no_gpu(machine, tf):
    ctx = machine(0)
    setup, devices = notebook_setup(NOTEBOOK)
    namespace = {'ensure_devices': ensure_devices}
    exec(setup, {'tf': tf})
    exec(devices, namespace)
    assert namespace['devices'] == ['/CPU:0', '/CPU:1']
    assert runtime_config(ctx).device_count['CPU'] == 2


def test_the_notebooks_setup_and_devices_on_two_gpus_keep_growth(machine, tf):
    ctx = machine(2)
    setup, devices = notebook_setup(NOTEBOOK)
    namespace = {'ensure_devices': ensure_devices}
    exec(setup, {'tf': tf})
    exec(devices, namespace)
    assert namespace['devices'] == ['/GPU:0', '/GPU:1']
    options = runtime_config(ctx).gpu_options
    assert options.allow_growth and split_of(options) == []


def test_the_notebooks_setup_and_devices_on_one_gpu_split_it(machine, tf, capsys):
    """One GPU: ``ensure_devices(2)`` splits it into two logical GPUs of 2048 MB, so growth is
    dropped (the rule above), and the process holds 4096 MB, not the whole GPU."""
    ctx = machine(1)
    setup, devices = notebook_setup(NOTEBOOK)
    exec(setup, {'tf': tf})
    exec(devices, {'ensure_devices': ensure_devices})
    options = runtime_config(ctx).gpu_options
    assert not options.allow_growth and split_of(options) == [[2048, 2048]]


@pytest.mark.parametrize('n_gpus', [1, 2])
def test_the_setup_committed_at_ec983d5_dropped_growth_on_every_gpu(machine, n_gpus, tf, capsys):
    """The bug, kept as proof: growth asked for on every GPU, then the CPU split, and the
    runtime would get no ``allow_growth`` (an empty logical-device entry for each GPU)."""
    ctx = machine(n_gpus)
    exec(SETUP_AT_EC983D5, {'tf': tf})
    assert all(tf.config.experimental.get_memory_growth(g) for g in ctx._physical_devices[1:])
    config = runtime_config(ctx)
    assert not config.gpu_options.allow_growth
    assert split_of(config.gpu_options) == [[]] * n_gpus and config.device_count['CPU'] == 2
