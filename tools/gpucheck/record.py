"""Store a batch run as a reference run: ``d2lhelpers/runs/ID.json``, the only writer of that shape.

    PYTHONPATH=tools python -m gpucheck.record BUILD_DIR --id h200-2027-01-15 [--driver 580]
    PYTHONPATH=tools python -m gpucheck.record run.json --id t4-2027-01-20   # from Colab/Kaggle

Reads ``BUILD_DIR/summary.json`` (written by ``python -m nbrun``), ``BUILD_DIR/gpu-tests.json``
when ``python -m gpucheck`` wrote one, and, when ``nvidia-smi`` is there, the driver, name and
memory of the GPUs. The run's shape (schema ``SCHEMA``, read by ``d2lhelpers.reference``) is
described field by field in docs/gpu-check.md ("Dạng của một lần chạy"). An existing run is kept
unless ``--force``; the file is written to a temporary name and renamed.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import sys
from pathlib import Path
from typing import Any

from nbrun.atomic import atomic_write

import d2lhelpers
from d2lhelpers.devices import smi_rows

from .check import gpu_device

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUT = ROOT / 'd2lhelpers' / 'runs'
_DATE = re.compile(r'(\d{4}-\d{2}-\d{2})$')
_ID = re.compile(r'[a-z0-9][a-z0-9.-]*')
SCHEMA = 1
GPU_TESTS = 'gpu-tests.json'  # written by python -m gpucheck: pytest -m gpu's counts
GPU_FIELDS = (
    'device',
    'name',
    'compute_capability',
    'physical',
    'memory_total_mb',
    'memory_limit_mb',
)
#: The run note on TF32: it describes TensorFlow's default, not what a notebook used.
TF32_NOTE = (
    'TF32 {state} khi `env_report()` chạy (trong một tiến trình riêng, với thiết lập mặc định của '
    'TensorFlow): câu này chỉ nói về các notebook để TF32 ở mặc định. Các notebook tắt TF32 ở mọi '
    'kết quả ghi là float32; khóa `tf32` trong kết quả của một notebook (nếu có) ghi giá trị mà '
    'notebook ấy dùng.'
)


class RecordError(Exception):
    """A run that cannot be recorded (the message is for the user, in Vietnamese)."""


def build_run(
    summary: dict[str, Any],
    run_id: str,
    *,
    smi: list[dict[str, str]] | None = None,
    driver: str | None = None,
    cuda_libraries: str | None = None,
    date: str | None = None,
    version: str | None = None,
    gpu_tests: dict[str, int] | None = None,
) -> dict[str, Any]:
    """The reference-run dict of a batch ``summary`` (the content of summary.json); ``smi``:
    ``d2lhelpers.devices.smi_rows()``, what nvidia-smi says of the GPUs."""
    smi = smi or []
    env = summary.get('environment') or {}
    machine = summary.get('machine') or {}
    gpus = env.get('gpus') or []
    first = gpus[0] if gpus else {}
    physical = [d for d in env.get('physical') or [] if gpu_device(d)]
    if date is None:
        found = _DATE.search(run_id)
        date = found.group(1) if found else datetime.date.today().isoformat()
    notebooks = {
        str(nb['notebook']).removesuffix('.ipynb'): {
            'status': nb.get('status'),
            'seconds': nb.get('seconds'),
            'parameters': nb.get('parameters') or {},
            'headline': nb.get('headline') or '',
            'results': nb.get('results') or {},
            'artefacts': {},
        }
        for nb in summary.get('notebooks') or []
    }
    tf32 = env.get('tf32')
    notes = []
    if tf32 is not None:
        notes.append(TF32_NOTE.format(state='bật' if tf32 else 'tắt'))
    load = summary.get('load_average') or {}
    if load.get('start') is not None:
        notes.append(
            f'Tải máy (load average 1 phút): {load["start"]} lúc bắt đầu, {load.get("end")} lúc '
            f'kết thúc, trên {machine.get("cores")} lõi.'
        )
    logical = [d for d in env.get('logical') or [] if gpu_device(d)]
    if len(logical) > len(physical) >= 1:
        notes.append(
            f'{len(physical)} GPU vật lý, {len(logical)} thiết bị logic trong báo cáo môi trường.'
        )
    memory = first.get('memory_total_mb')
    memory = f'{memory:.0f} MiB' if memory else (f'{smi[0]["memory.total"]} MiB' if smi else None)
    return {
        'schema': SCHEMA,
        'id': run_id,
        'date': date,
        'commit': summary.get('commit'),
        'collection_version': version if version is not None else d2lhelpers.__version__,
        'command': summary.get('command'),
        'machine': {
            'gpu': first.get('name') or (smi[0]['name'] if smi else None),
            'gpu_count': len(physical) or len(smi),
            'compute_capability': first.get('compute_capability'),
            'gpu_memory': memory,
            'driver': driver or (smi[0]['driver_version'] if smi else None),
            'cuda_libraries': cuda_libraries,
            'cpu_cores': machine.get('cores'),
            'platform': machine.get('platform'),
            'python': machine.get('python'),
            'gpus': [{k: g.get(k) for k in GPU_FIELDS} for g in gpus],
        },
        'software': {
            'tensorflow': env.get('tensorflow'),
            'tf_cuda': env.get('cuda'),
            'cudnn': env.get('cudnn'),
            'keras': env.get('keras'),
            'numpy': env.get('numpy'),
        },
        'gpu_tests': gpu_tests,
        'notes': notes,
        'notebooks': notebooks,
    }


def dumps(run: dict[str, Any]) -> str:
    """The text of a run file: indent 1, UTF-8 as is, a final newline."""
    return json.dumps(run, indent=1, ensure_ascii=False) + '\n'


def write_run(run: dict[str, Any], out: Path, *, force: bool = False) -> Path:
    """Write ``run`` to ``out/<id>.json`` atomically; refuse to replace one unless ``force``."""
    if not _ID.fullmatch(run['id']):
        raise RecordError(f'id {run["id"]!r} không hợp lệ: chỉ chữ thường, số, "-" và "."')
    out.mkdir(parents=True, exist_ok=True)
    target = out / f'{run["id"]}.json'
    if target.exists() and not force:
        raise RecordError(f'{target} đã có: không ghi đè (thêm --force để ghi đè)')
    atomic_write(target, dumps(run))
    return target


def rename(run: dict[str, Any], run_id: str) -> dict[str, Any]:
    """A run file (``run.json`` of ``python -m gpucheck``, e.g. downloaded from Colab) under a new
    id, its date taken from the id."""
    if run.get('schema') != SCHEMA:
        raise RecordError(f'lần chạy có schema {run.get("schema")!r}, cần schema {SCHEMA}')
    found = _DATE.search(run_id)
    return {**run, 'id': run_id, 'date': found.group(1) if found else run['date']}


def record(
    source: Path,
    run_id: str,
    *,
    out: Path = DEFAULT_OUT,
    driver: str | None = None,
    cuda_libraries: str | None = None,
    force: bool = False,
    smi: list[dict[str, str]] | None = None,
) -> Path:
    """Record ``source``: a batch folder (its ``summary.json``) or a run file (``run.json``);
    returns the file written."""
    source = Path(source)
    path = source if source.is_file() else source / 'summary.json'
    try:
        data = json.loads(path.read_text(encoding='utf-8'))
    except FileNotFoundError:
        raise RecordError(f'không có {path}: chạy python -m nbrun ... --out {source}') from None
    except json.JSONDecodeError as e:
        raise RecordError(f'{path} không phải JSON hợp lệ: {e}') from None
    if source.is_file():
        return write_run(rename(data, run_id), Path(out), force=force)
    tests_file = source / GPU_TESTS
    gpu_tests = json.loads(tests_file.read_text('utf-8')) if tests_file.is_file() else None
    run = build_run(
        data,
        run_id,
        smi=smi_rows() if smi is None else smi,
        driver=driver,
        cuda_libraries=cuda_libraries,
        gpu_tests=gpu_tests,
    )
    return write_run(run, Path(out), force=force)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog='python -m gpucheck.record', description=__doc__)
    parser.add_argument('source', type=Path, help='thư mục --out của nbrun, hoặc một run.json')
    parser.add_argument('--id', dest='run_id', required=True, help='ví dụ h200-2027-01-15')
    parser.add_argument('--driver', help='phiên bản driver (mặc định: theo nvidia-smi)')
    parser.add_argument('--cuda-libraries', help='thư viện CUDA của máy, ví dụ "CUDA 13"')
    parser.add_argument('--out', type=Path, default=DEFAULT_OUT, help='mặc định d2lhelpers/runs')
    parser.add_argument('--force', action='store_true', help='ghi đè lần chạy đã có')
    try:
        target = record(**vars(parser.parse_args(argv)))
    except RecordError as e:
        print(f'gpucheck.record: {e}', file=sys.stderr)
        return 1
    print(f'gpucheck.record: đã ghi {target}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
