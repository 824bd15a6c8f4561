"""Runs for the tests, made by the real producers: nbrun's summary ``Entry``, ``env_report``'s
``EnvReport``/``GPUInfo``, ``save_results`` and ``gpucheck.record.build_run``; never typed as a
run file by hand.

- ``BATCH_CPU``: the batch output (``summary.json``) of the collection on the CI-class CPU
  machine, committed: the CPU reference run ``CPU_RUN`` was recorded from it;
- ``demo_summary(...)``/``demo_run(...)``: a small summary of one made-up notebook on a GPU
  machine, for the reader's unit tests.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gpucheck import record
from nbrun.summary import Entry

from d2lhelpers import save_results
from d2lhelpers.devices import EnvReport, GPUInfo

ROOT = Path(__file__).resolve().parents[1]
BATCH_CPU = ROOT / 'tests' / 'fixtures' / 'batch-cpu'
CPU_RUN = 'cpu2-2026-12-03'
GPU_RUN = 'h200-2026-11-30'
DEMO = 'exercises/99-demo'


def batch_cpu_summary() -> dict[str, Any]:
    return json.loads((BATCH_CPU / 'summary.json').read_text(encoding='utf-8'))


def gpu_env(names: tuple[str, ...] = ('NVIDIA H100 80GB HBM3',)) -> dict[str, Any]:
    """``env_report().as_dict()`` of a machine with these GPUs, one logical device each."""
    gpus = [
        GPUInfo(f'/GPU:{i}', name, '9.0', i, memory_total_mb=81559.0)
        for i, name in enumerate(names)
    ]
    devices = ['/CPU:0', *(g.device for g in gpus)]
    report = EnvReport('2.21.0', '3.15.1', '2.4.6', True, '12.5.1', '9', devices, devices, False)
    report.gpus = gpus
    return report.as_dict()


def demo_results() -> dict[str, Any]:
    """What a notebook's ``save_results`` cell saves (sizes as int keys, as the notebooks do)."""
    results = {
        'median_s': {'a': 0.5, 'b': 0.0012},
        'speedup': 1.27,
        'gflops': {'/GPU:0': {2048: 1234.5}},
        'crossover_n': 256,
        'equal': True,
    }
    return save_results(results, None)


def demo_summary(version_env: dict[str, Any] | None = None) -> dict[str, Any]:
    """A summary.json of one batch of one notebook, ``exercises/99-demo.ipynb``."""
    entry = Entry(f'{DEMO}.ipynb', 'ok', 12.5, results=demo_results(), headline='speedup 1.27x')
    return {
        'command': 'python -m nbrun exercises --out build',
        'commit': 'abc1234',
        'machine': {'platform': 'Linux', 'python': '3.12.3', 'cores': 16},
        'environment': version_env or gpu_env(),
        'notebooks': [entry.as_dict()],
    }


def demo_run(run_id: str = 'h100-2026-01-02', **kw: Any) -> dict[str, Any]:
    return record.build_run(demo_summary(), run_id, smi=[], **kw)


def write_run(folder: Path, run: dict[str, Any]) -> Path:
    return record.write_run(run, folder, force=True)
