"""``make gpu-check``: run the collection on this machine's GPU and check the run.

Without a GPU (TensorFlow, asked in a subprocess, sees no physical GPU, or cannot be imported) it
prints one line saying why and exits 0. Otherwise: every notebook through the batch runner
(``python -m nbrun notebooks exercises --out build/gpu-check``), the tests marked ``gpu`` if there
are any, the run recorded as ``build/gpu-check/run.json`` (``gpucheck.record``) and checked
(``gpucheck.check``); prints a table of the findings and exits 1 if any failed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from . import record
from .check import check_run, failed, table

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / 'build' / 'gpu-check'
PROBE_TIMEOUT = 180
RUN_TIMEOUT = 3600
TEST_TIMEOUT = 1800
NO_TESTS = 5  # pytest: no tests collected

_PROBE = (
    'import json, tensorflow as tf; '
    "print(json.dumps([tf.__version__, len(tf.config.list_physical_devices('GPU'))]))"
)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
    paths = [str(ROOT / 'tools'), *filter(None, env.get('PYTHONPATH', '').split(os.pathsep))]
    env['PYTHONPATH'] = os.pathsep.join(dict.fromkeys(paths))
    return env


def gpu_probe() -> tuple[int, str]:
    """(number of physical GPUs TensorFlow sees, what it said), asked in a subprocess."""
    try:
        proc = subprocess.run(
            [sys.executable, '-c', _PROBE],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT,
            env=_env(),
        )
    except subprocess.TimeoutExpired:
        return 0, f'TensorFlow không trả lời sau {PROBE_TIMEOUT} s'
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ['?'])[-1]
        return 0, f'không import được TensorFlow: {last}'
    version, count = json.loads(proc.stdout.strip().splitlines()[-1])
    return count, f'TensorFlow {version} thấy {count} GPU vật lý'


def _step(what: str, cmd: list[str], timeout: float) -> int:
    print(f'gpu-check: {what}: {" ".join(cmd)}', flush=True)
    try:
        return subprocess.run(cmd, cwd=ROOT, env=_env(), timeout=timeout).returncode
    except subprocess.TimeoutExpired:
        print(f'gpu-check: {what}: quá {timeout:.0f} s, đã dừng', flush=True)
        return 124


def main() -> int:
    count, reason = gpu_probe()
    if count == 0:
        print(f'gpu-check: bỏ qua — không có GPU ({reason})')
        return 0
    print(f'gpu-check: {reason}', flush=True)
    py = sys.executable
    status = _step(
        'chạy notebook',
        [py, '-m', 'nbrun', 'notebooks', 'exercises', '--out', str(OUT)],
        RUN_TIMEOUT,
    )
    if not (OUT / 'summary.json').is_file():
        print(f'gpu-check: trình chạy hàng loạt không ghi {OUT / "summary.json"} (mã {status})')
        return 1
    tests = _step('kiểm thử gpu', [py, '-m', 'pytest', 'tests', '-m', 'gpu', '-q'], TEST_TIMEOUT)
    if tests == NO_TESTS:
        print('gpu-check: không có kiểm thử nào đánh dấu gpu')
    try:
        path = record.record(OUT, 'run', out=OUT, force=True)
    except record.RecordError as e:
        print(f'gpu-check: {e}')
        return 1
    run = json.loads(path.read_text(encoding='utf-8'))
    findings = check_run(run)
    print(table(findings))
    bad = failed(findings)
    problems = [f'{len(bad)} kiểm tra hỏng'] if bad else []
    if status != 0:
        problems.append(f'trình chạy hàng loạt thoát với mã {status}')
    if tests not in (0, NO_TESTS):
        problems.append(f'pytest -m gpu thoát với mã {tests}')
    if problems:
        print('gpu-check: HỎNG: ' + '; '.join(problems))
        return 1
    print(f'gpu-check: đạt ({len(findings)} kiểm tra, lần chạy ở {path})')
    return 0


if __name__ == '__main__':
    sys.exit(main())
