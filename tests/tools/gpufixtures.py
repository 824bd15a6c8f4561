"""Runs (schema 1) for the gpucheck tests, built from a few physical figures of a machine so
that every saved time and rate agree: GFLOP/s = 2n^3 / t, t = dispatch floor + work / rate.

``build_run()`` is a healthy run of the current notebooks on one H100 SXM with 16 CPU cores (as
``make gpu-check`` records it); ``build_run(gpu=None)`` the same recorder's run on a 2-core
machine without a GPU. No TensorFlow needed.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpucheck import check, order, record
from nbrun.summary import Entry

from d2lhelpers import NEAR_FLOOR, save_results
from d2lhelpers.devices import EnvReport, GPUInfo

SIZES = [16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192]


@dataclass(frozen=True)
class GPU:
    """A GPU as the notebooks measure it: name as TensorFlow reports it, and what it reaches
    (GFLOP/s with TF32 off, with TF32, float16; GB/s of the 1 GiB add)."""

    name: str = 'NVIDIA H100 80GB HBM3'
    compute_capability: str = '9.0'
    memory_total_mb: float = 81559.0
    fp32: float = 40_000.0  # 60% of 67 TFLOP/s (the H200 measured 51% at n = 8192)
    tf32: float | None = 280_000.0  # None: no TF32 (T4, V100): the notebook skips the row
    fp16: float = 600_000.0
    bandwidth: float = 2_900.0  # 87% of 3350 GB/s
    floor: float = 6.5e-5  # one eager dispatch, in seconds


H100 = GPU()
T4 = GPU('Tesla T4', '7.5', 15360.0, 4_500.0, None, 25_000.0, 230.0, 7.0e-5)


@dataclass(frozen=True)
class CPU:
    cores: int
    tf: float  # GFLOP/s of TF's float32 matmul at large n
    numpy: float
    tf_floor: float
    bandwidth: float


CPU16 = CPU(16, 900.0, 1000.0, 4.8e-5, 180.0)
CPU2 = CPU(2, 190.0, 200.0, 4.8e-5, 12.0)


def matmul_time(n: int, floor: float, gflops: float) -> float:
    return floor + 2 * n**3 / (gflops * 1e9)


def matmul_rows(sizes: list[int], floor: float, gflops: float) -> tuple[dict, dict]:
    """(median_s, gflops) of n x n matmuls, keyed by str(n) as in the saved JSON."""
    times = {str(n): matmul_time(n, floor, gflops) for n in sizes}
    return times, {k: 2 * int(k) ** 3 / t / 1e9 for k, t in times.items()}


def near(times: dict[str, float], floor: float) -> list[int]:
    return [int(n) for n, t in times.items() if t <= NEAR_FLOOR * floor]


def mlp_params(width: int, features: int = 128) -> int:  # data-parallel's timed network
    return features * width + width + width * width + width + width + 1


def ex1(gpus: list[GPU], cpu: CPU) -> dict:
    labels = {'TF /CPU:0': (cpu.tf_floor, cpu.tf)}
    labels |= {f'TF /GPU:{i}': (g.floor, g.fp32) for i, g in enumerate(gpus)}
    labels['NumPy (CPU)'] = (1.7e-6, cpu.numpy)
    sizes = {lb: SIZES if 'GPU' in lb else SIZES[:8] for lb in labels}
    rows = {lb: matmul_rows(sizes[lb], *labels[lb]) for lb in labels}
    median = {lb: r[0] for lb, r in rows.items()}
    floors = {lb: f for lb, (f, _) in labels.items()}
    near_floor = {lb: near(median[lb], floors[lb]) for lb in labels}
    cross = order.crossover(median) if gpus else None  # the one rule the check uses too
    return {
        'sizes': sizes,
        'devices': list(labels),
        'tf32': False,
        'near_floor': near_floor,
        'crossover_n': cross,
        'floor_s': floors,
        'median_s': median,
        'gflops': {lb: r[1] for lb, r in rows.items()},
    }


def ex2(kind: str) -> dict:
    # 235,146 float32 parameters (~0.94 MB): via the host, two pageable copies and waits
    times = {'via_host': 1.6e-3, 'on_device': 1.2e-4, 'floor': 6.0e-5}
    if kind == 'CPU':
        times = {'via_host': 4.1e-4, 'on_device': 1.5e-4, 'floor': 6.0e-5}
    ratio = times['via_host'] / times['on_device']
    devices = {'original': f'/{kind}:1'} | dict.fromkeys(
        ('weights_h5', 'checkpoint', 'checkpoint_deferred'), f'/{kind}:0'
    )
    return {
        'restored_equal': True,
        'equal': {'weights_h5': True, 'checkpoint': True, 'checkpoint_deferred': True},
        'n_params': 235146,
        'devices': devices,
        'near_floor': False,
        'median_s': times,
        'floor_s': times['floor'],
        'host_vs_device': {
            'ratio': ratio,
            'low': 0.9 * ratio,
            'high': 1.1 * ratio,
            'kind': 'slower',
        },
    }


def ex3(kind: str) -> dict:
    times = {  # 1000 steps of a 100 x 100 matmul: dispatch-bound everywhere
        'no_logging': 0.0395,
        'host_every_step': 0.640,
        'device_once': 0.421,
        'tf_function': 0.0797,
        'eager_no_logging': 0.060,
    }
    floor = 0.058
    if kind == 'CPU':  # NOTES.md, 2 cores
        times = {
            'no_logging': 0.020,
            'host_every_step': 0.396,
            'device_once': 0.239,
            'tf_function': 0.027,
            'eager_no_logging': 0.200,
        }
        floor = 0.190
    return {
        'n': 100,
        'steps': 1000,
        'device': f'/{kind}:0',
        'tf32': False,
        'logs_equal': True,
        'median_s': times,
        'floor_s': floor,
        'host_every_step_over_device_once': times['host_every_step'] / times['device_once'],
        'tf_function_over_no_logging': times['tf_function'] / times['no_logging'],
    }


def ex4(gpus: list[GPU], cpu: CPU) -> dict:
    kind, n = ('GPU', 6000) if gpus else ('CPU', 1200)
    rate = gpus[0].fp32 if gpus else cpu.tf
    sequential = 1.2e-4 + 4 * n**3 / (rate * 1e9)  # two matmuls on one device
    concurrent = sequential / 0.99  # two logical devices of one chip: no gain
    if len(gpus) > 1:  # one matmul per GPU: the slower one sets the time
        concurrent = 1.2e-4 + 2 * n**3 / (min(g.fp32 for g in gpus) * 1e9)
    return {
        'n': n,
        'devices': [f'/{kind}:0', f'/{kind}:1'],
        'split': len(gpus) < 2,
        'tf32': False,
        'speedup': sequential / concurrent,
        'median_s': {'sequential': sequential, 'concurrent': concurrent},
        'sums_equal': True,
        'floor_s': 1.2e-4,
    }


def choose(gpus: list[GPU], cpu: CPU) -> dict:
    devices = {'/CPU:0': (cpu.tf_floor, cpu.tf, SIZES[:7], 1024)}
    devices |= {f'/GPU:{i}': (g.floor, g.fp32, SIZES, 8192) for i, g in enumerate(gpus)}
    rows = {d: matmul_rows(sizes, floor, rate) for d, (floor, rate, sizes, _) in devices.items()}
    near_floor = {d: near(rows[d][0], devices[d][0]) for d in devices}
    ceiling = {}
    for d, (_, gflops) in rows.items():
        clear = [g for k, g in gflops.items() if int(k) not in near_floor[d]]
        ceiling[d] = max(clear, default=None)
    bandwidth = {'/CPU:0': cpu.bandwidth} | {f'/GPU:{i}': g.bandwidth for i, g in enumerate(gpus)}
    dtypes = {}
    for d, (floor, rate, _, n) in devices.items():
        one = {'float32': rate, 'float16': 0.4 * rate, 'bfloat16': 0.3 * rate}
        if d != '/CPU:0':
            g = gpus[int(d[-1])]
            one = {'float32': g.fp32, 'tf32': g.tf32, 'float16': g.fp16, 'bfloat16': g.fp16}
        dtypes[d] = {k: matmul_rows([n], floor, r)[1][str(n)] for k, r in one.items() if r}
    return {
        'bandwidth_gbs': bandwidth,
        'gflops': {d: r[1] for d, r in rows.items()},
        'floor_s': {d: v[0] for d, v in devices.items()},
        'near_floor': near_floor,
        'dtype_gflops': dtypes,
        'ceiling_gflops': ceiling,
        'ridge_point_flop_per_byte': {d: ceiling[d] / bandwidth[d] for d in devices},
        'tf32': False,
    }


def data_parallel(gpus: list[GPU], cpu: CPU) -> dict:
    kind = 'GPU' if gpus else 'CPU'
    rate = gpus[0].fp32 if gpus else cpu.tf
    step_width, mp_width = (6144, 4096) if gpus else (512, 512)
    params = mlp_params(step_width)
    step_flops = 6 * params * 512
    one = 4.0e-4 + step_flops / (rate * 1e9)
    # one chip: the all-reduce only adds; two GPUs: half the batch each, then the all-reduce
    two = 2.1 * one if len(gpus) < 2 else 1.3 * one
    forward = 6.0e-5 + 4 * 2 * 512 * mp_width**2 / (rate * 1e9)
    losses = [0.8144, 0.3044, 0.2467, 0.2344, 0.2286]
    return {
        'max_abs_weight_diff': {'fit': 3.0e-6, 'custom_loop': 3.0e-6, 'multi_worker': 2.0e-6},
        'weights_match': True,
        'jit_compile': {'single': False, 'mirrored': False},
        'losses': {'single': losses, 'mirrored_fit': losses, 'custom_loop': losses},
        'workers_equal': True,
        'split': len(gpus) < 2,
        'devices': [f'/{kind}:0', f'/{kind}:1'],
        'tf32': False,
        'step_time_s': {'1': one, '2': two},
        'step_floor_s': {'1': 4.0e-4, '2': 1.1e-3},
        'model_parallel_s': {
            'một thiết bị': [forward, 6.0e-5],
            'hai thiết bị': [1.02 * forward, 1.3e-4],
        },
        'gradient_bytes': 4 * params,
        'step_flops': step_flops,
    }


def use_gpu(gpus: list[GPU]) -> dict:
    """use-gpu's saved placements, in the shape of its save cell."""
    kind = 'GPU' if gpus else 'CPU'
    d0, d1 = f'/{kind}:0', f'/{kind}:1'
    placed = {'S1': d1, 'S2': d0, 'W': d1, 'X': d0, 'Y': d1, 'Y_hat': d0, 'Z': d1, 'lazy': d0}
    copies = {'net/dense/bias': [d0, d1], 'net/dense/kernel': [d0, d1]}
    return {
        'devices': [d0, d1],
        'mirrored_copies': copies,
        'physical_gpus': len(gpus),
        'placed': placed,
    }


def environment(gpus: list[GPU]) -> dict:
    """``env_report().as_dict()`` on a machine with these physical GPUs, one logical device each
    (the report a notebook prints before anything splits a GPU)."""
    info = [
        GPUInfo(f'/GPU:{i}', g.name, g.compute_capability, i, memory_total_mb=g.memory_total_mb)
        for i, g in enumerate(gpus)
    ]
    devices = ['/CPU:0', *(g.device for g in info)]
    cuda = ('12.5.1', '9') if gpus else (None, None)
    report = EnvReport('2.21.0', '3.15.1', '2.4.6', bool(gpus), *cuda, devices, devices, False)
    report.gpus = info
    return report.as_dict()


def build_run(gpu: GPU | None = H100, second: GPU | None = None) -> dict:
    """A run of the current notebooks, recorded by ``gpucheck.record.build_run`` from a batch
    summary of nbrun ``Entry`` items whose results went through ``save_results``: on one ``gpu``
    (split in two logical devices where a lesson needs two) with 16 cores; on ``gpu`` and a
    ``second`` physical GPU (nothing split); or, with ``gpu=None``, on 2 cores and no GPU (the
    notebooks' CPU branches; no GPU tests run)."""
    gpus = [g for g in (gpu, second) if g]
    cpu = CPU16 if gpus else CPU2
    kind = 'GPU' if gpus else 'CPU'
    results = {
        check.USE: use_gpu(gpus),
        check.EX1: ex1(gpus, cpu),
        check.EX2: ex2(kind),
        check.EX3: ex3(kind),
        check.EX4: ex4(gpus, cpu),
        check.CHOOSE: choose(gpus, cpu),
        check.DP: data_parallel(gpus, cpu),
    }
    entries = [
        Entry(f'{name}.ipynb', 'ok', 20.0, results=save_results(r, None)).as_dict()
        for name, r in results.items()
    ]
    summary = {
        'command': 'python -m gpucheck',
        'commit': 'abc1234',
        'machine': {'platform': 'Linux-6.8-x86_64-with-glibc2.39', 'python': '3.12.3'},
        'environment': environment(gpus),
        'notebooks': entries,
    }
    summary['machine']['cores'] = cpu.cores
    smi = [
        {'driver_version': '580.95.05', 'name': g.name, 'memory.total': f'{g.memory_total_mb:.0f}'}
        for g in gpus
    ]
    tests = {'passed': 2, 'failed': 0, 'skipped': 0, 'errors': 0} if gpus else None
    run_id = f'{"h100" if gpus else "cpu"}-2026-12-05'
    return record.build_run(summary, run_id, smi=smi, gpu_tests=tests)
