"""``make gpu-check``, ``python -m gpucheck``: run the collection on this GPU and check the run.

1. Ask the NVIDIA driver (``gpucheck.driver``) and TensorFlow (in a subprocess, its C++ log on,
   one op on the GPU) which GPUs they see. Neither: one line, exit 0 (skip). The driver shows a
   GPU that TensorFlow cannot use: exit 1 with TensorFlow's own reason, never a skip.
2. Every notebook through the batch runner into ``--out`` (emptied first, only if gpucheck wrote
   it), each with a timeout; past ``BATCH_TIMEOUT`` the batch is stopped and everything it
   started is killed.
3. ``run.json`` recorded (``gpucheck.record``), the tests marked ``gpu`` run (counts in
   ``gpu-tests.json``), ``run.json`` recorded again with them, and the run checked
   (``gpucheck.check``): a table of findings; exit 1 if any failed.

``--check-run RUN_JSON`` only checks a run file made elsewhere (Colab, Kaggle). Everything printed
also goes to ``gpucheck.log`` in ``--out`` as it happens, so a run cut short leaves its log.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from . import record
from .check import check_run, failed, summary, table
from .driver import driver_gpus
from .presence import COUNTS

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / 'build' / 'gpu-check'
LOG = 'gpucheck.log'
NOTEBOOKS = ('notebooks', 'exercises')
PROBE_TIMEOUT = 180
NOTEBOOK_TIMEOUT = 900
BATCH_TIMEOUT = 3600
TEST_TIMEOUT = 900
STOP_GRACE = 60  # seconds the batch gets to stop its kernels after SIGTERM

_PROBE = """\
import json, sys, tensorflow as tf
info = tf.sysconfig.get_build_info()
gpus = tf.config.list_physical_devices('GPU')
try:  # one op on the GPU: a driver too old for TF's kernels fails here, in one line
    with tf.device('/GPU:0'):
        gpus and float(tf.reduce_sum(tf.ones(4)))
except Exception as e:
    print(f'GPU op on /GPU:0 failed: {type(e).__name__}: {e}'.splitlines()[0], file=sys.stderr)
    gpus = []
print(json.dumps([tf.__version__, bool(info.get('is_cuda_build')), len(gpus)]))
"""
_WHY = ('cuda', 'gpu', 'dlopen', 'driver', 'libcu', 'nvidia')


class Log:
    """Print a line and append it to the log file at once."""

    def __init__(self, path: Path):
        self.path = path

    def __call__(self, line: str) -> None:
        print(line, flush=True)
        with self.path.open('a', encoding='utf-8') as f:
            f.write(line + '\n')


def _env() -> dict[str, str]:
    """The environment of every process gpucheck starts. Without Kaggle's marker: the notebooks'
    install cells would replace the checkout under test with GitHub's package."""
    env = dict(os.environ)
    env.pop('KAGGLE_KERNEL_RUN_TYPE', None)
    env.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
    return env


def visible_gpus(drivers: list[str]) -> int:
    """How many of the driver's GPUs this process may use (``CUDA_VISIBLE_DEVICES``)."""
    visible = os.environ.get('CUDA_VISIBLE_DEVICES')
    if visible is None:
        return len(drivers)
    return min(len(drivers), len([d for d in visible.split(',') if d.strip()]))


def usable_out(out: Path) -> bool:
    """Whether ``--out`` may be emptied: absent, empty, or a folder gpucheck wrote before."""
    return not out.exists() or (out.is_dir() and (not any(out.iterdir()) or (out / LOG).is_file()))


def tf_probe() -> tuple[str | None, bool, int, str]:
    """(TensorFlow version or None, built with CUDA, physical GPUs it sees, what it said)."""
    env = _env() | {'TF_CPP_MIN_LOG_LEVEL': '0'}  # its reasons are C++ log lines
    try:
        proc = subprocess.run(
            [sys.executable, '-c', _PROBE],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT,
            env=env,
        )
    except subprocess.TimeoutExpired:
        return None, False, 0, f'TensorFlow không trả lời sau {PROBE_TIMEOUT} s'
    said = [line.strip() for line in proc.stderr.splitlines() if line.strip()]
    if proc.returncode != 0:
        return None, False, 0, 'không import được TensorFlow: ' + (said or ['?'])[-1]
    version, cuda_build, count = json.loads(proc.stdout.strip().splitlines()[-1])
    why = [line for line in said if any(w in line.lower() for w in _WHY)]
    return version, cuda_build, count, '\n'.join(why[-5:])


def unusable_reason(version: str | None, cuda_build: bool, said: str) -> str:
    """Why TensorFlow sees no GPU although the driver shows one, in the user's terms."""
    if version is None:
        return said
    if not cuda_build:
        return (
            f'TensorFlow {version} ở {sys.executable} là bản chỉ CPU (is_cuda_build = False): '
            "cài bản GPU (make GPU=1 gpu-check, hoặc pip install 'tensorflow[and-cuda]')"
        )
    return f'TensorFlow {version} (bản có CUDA) không dùng được GPU nào. TensorFlow nói:\n' + (
        said or '(không có dòng log nào nhắc đến GPU hay CUDA)'
    )


def run_batch(
    log: Log, out: Path, timeout: float = BATCH_TIMEOUT, paths: tuple[str, ...] = NOTEBOOKS
) -> int:
    """The batch runner on ``paths``, its output logged line by line. Past ``timeout`` it gets
    SIGTERM (it stops its kernels and writes summary.json); in any ending, whatever of its run
    is left is killed. Returns its exit status (124 after a timeout)."""
    from nbrun.processes import TOKEN_VAR, kill_run, new_token

    cmd = [sys.executable, '-m', 'nbrun', *paths, '--out', str(out)]
    cmd += ['--timeout', str(NOTEBOOK_TIMEOUT)]
    log(f'gpu-check: chạy notebook: {" ".join(cmd)}')
    token = new_token()
    popen = subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=_env() | {TOKEN_VAR: token},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )

    def copy_output() -> None:
        for line in popen.stdout:
            log(line.rstrip())

    pump = threading.Thread(target=copy_output)
    pump.start()
    status = None
    try:
        status = popen.wait(timeout)
    except subprocess.TimeoutExpired:
        log(f'gpu-check: trình chạy hàng loạt quá {timeout:.0f} s: dừng nó (SIGTERM)')
        popen.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            popen.wait(STOP_GRACE)
    finally:
        if killed := kill_run(popen, token):
            log(f'gpu-check: đã giết {len(killed)} tiến trình còn lại của đợt chạy')
        pump.join()
    return 124 if status is None else status


def gpu_tests(log: Log, out: Path) -> dict[str, int]:
    """``pytest tests -m gpu`` without plugins (no nbval needed); its counts, also written to
    ``out/gpu-tests.json``. A run with no test at all counts as one error."""
    junit = out / 'gpu-tests.xml'
    cmd = [sys.executable, '-m', 'pytest', 'tests', '-m', 'gpu', '-q', f'--junitxml={junit}']
    log(f'gpu-check: kiểm thử gpu: {" ".join(cmd)}')
    env = _env() | {'PYTEST_DISABLE_PLUGIN_AUTOLOAD': '1'}
    try:
        proc = subprocess.run(
            cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=TEST_TIMEOUT
        )
        for line in (proc.stdout + proc.stderr).splitlines():
            log(line)
    except subprocess.TimeoutExpired:
        log(f'gpu-check: kiểm thử gpu quá {TEST_TIMEOUT} s, đã dừng')
    counts = junit_counts(junit)
    (out / record.GPU_TESTS).write_text(json.dumps(counts) + '\n', encoding='utf-8')
    return counts


def junit_counts(path: Path) -> dict[str, int]:
    """passed/failed/skipped/errors of the tests in pytest's JUnit XML; no file or no test: one
    error. A module skipped at collection (``classname=""``: one that needs nbval, which
    Colab's and Kaggle's own environments lack) held no test that ran: it is not counted."""
    counts = dict.fromkeys(COUNTS, 0)  # the keys the rule kiểm thử gpu reads
    try:
        cases = list(ET.parse(path).getroot().iter('testcase'))
    except (OSError, ET.ParseError):
        return counts | {'errors': 1}
    for case in cases:
        tags = {child.tag for child in case} & {'failure', 'error', 'skipped'}
        if not case.get('classname') and tags == {'skipped'}:
            continue
        counts['failed'] += 'failure' in tags
        counts['errors'] += 'error' in tags
        counts['skipped'] += tags == {'skipped'}
        counts['passed'] += not tags
    if not any(counts.values()):
        counts['errors'] = 1
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog='python -m gpucheck', description=__doc__)
    parser.add_argument('--out', type=Path, default=OUT, help='mặc định build/gpu-check')
    parser.add_argument('--check-run', type=Path, metavar='RUN_JSON', help='chỉ kiểm tra run.json')
    args = parser.parse_args(argv)
    if args.check_run is not None:
        findings = check_run(json.loads(args.check_run.read_text(encoding='utf-8')))
        print(f'{table(findings)}\ngpu-check: {summary(findings)}')
        return 1 if failed(findings) else 0
    drivers = driver_gpus()
    version, cuda_build, count, said = tf_probe()
    if not drivers and count == 0:
        why = said or f'TensorFlow {version} không thấy GPU nào'
        print(f'gpu-check: bỏ qua — không có GPU (driver NVIDIA không thấy GPU nào; {why})')
        return 0
    if count == 0 or count < visible_gpus(drivers):
        uses = 'không dùng được GPU nào' if count == 0 else f'chỉ dùng được {count}'
        seen = f'driver thấy {len(drivers)} GPU ({"; ".join(drivers)})'
        print(f'gpu-check: HỎNG: {seen} nhưng TensorFlow {uses}.')
        print(unusable_reason(version, cuda_build, said))
        return 1
    if not usable_out(args.out):
        print(f'gpu-check: không xóa {args.out}: thư mục có tệp mà không phải của gpucheck ({LOG})')
        return 2
    shutil.rmtree(args.out, ignore_errors=True)
    args.out.mkdir(parents=True)
    log = Log(args.out / LOG)
    log(f'gpu-check: TensorFlow {version} thấy {count} GPU; driver: {"; ".join(drivers) or "?"}')
    return check_this_machine(log, args.out)


def check_this_machine(log: Log, out: Path) -> int:
    """Steps 2 and 3 of the module docstring, into ``out``."""
    start = time.monotonic()
    status = run_batch(log, out)
    if not (out / 'summary.json').is_file():
        log(f'gpu-check: HỎNG: trình chạy hàng loạt không ghi summary.json (mã {status})')
        return 1
    log(f'gpu-check: đã ghi {record.record(out, "run", out=out, force=True)} (chưa kiểm thử gpu)')
    gpu_tests(log, out)  # their counts are judged with the run (kiểm thử gpu)
    path = record.record(out, 'run', out=out, force=True)
    findings = check_run(json.loads(path.read_text(encoding='utf-8')))
    log(table(findings))
    problems = [f'{len(failed(findings))} kiểm tra hỏng'] if failed(findings) else []
    if status != 0:
        problems.append(f'trình chạy hàng loạt thoát với mã {status}')
    took = f'{time.monotonic() - start:.0f} s ({summary(findings)}'
    if problems:
        log(f'gpu-check: HỎNG sau {took}): ' + '; '.join(problems))
        return 1
    log(f'gpu-check: đạt sau {took}; lần chạy ở {path})')
    return 0


if __name__ == '__main__':
    sys.exit(main())
