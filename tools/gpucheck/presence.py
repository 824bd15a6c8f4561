"""What a run holds.

* ``trạng thái``: every notebook ended ``ok``; ``có notebook`` / ``khóa kết quả``: every notebook
  and every key of ``REQUIRED`` is there.
* ``kiểm thử gpu``: ``pytest -m gpu`` ran, >= 1 test passed, none failed, errored or was skipped
  (a skipped GPU test is a GPU that was not tested).
* ``có GPU``: ``machine.gpus`` is not empty, every table of GPU figures has GPU rows, and every
  device work was placed on is a GPU (use-gpu: two at least).
* ``số đo hữu hạn, > 0``: every timing and rate (``measurements``; ``save_results`` writes NaN
  and infinity as null).
* equalities true (``EQUALITY_KEYS``), ``max_abs_weight_diff`` < 1e-5 (float32 rounding of the
  same kernels is 1e-7..1e-6), ``cùng jit_compile`` on both sides of data-parallel.
"""

from __future__ import annotations

from . import check
from .check import Checker, gpu_device, measurements, number, strings

MAX_WEIGHT_DIFF = 1e-5
COUNTS = ('passed', 'failed', 'skipped', 'errors')


def status(c: Checker) -> None:
    for name, entry in c.run.get('notebooks', {}).items():
        c.add(name, check.STATUS, entry.get('status') == 'ok', f'status {entry.get("status")!r}')


def required_keys(c: Checker) -> None:
    for name, keys in check.REQUIRED.items():
        if name not in c.run.get('notebooks', {}):
            c.add(name, check.HAS_NOTEBOOK, False, 'lần chạy không có notebook này')
            continue
        results = c.results(name)
        for key in keys:
            if key not in results:
                c.add(name, check.KEYS, False, f'không có khóa {key!r} trong kết quả')


def gpu_tests(c: Checker) -> None:
    tests = c.run.get('gpu_tests')
    if tests is None:
        c.add('-', check.GPU_TESTS, False, 'gpu_tests = null: pytest -m gpu chưa chạy')
        return
    passed, failures, skipped, errors = (int(tests[k]) for k in COUNTS)  # else a rule error
    problems = []
    if failures or errors:
        problems.append(f'{failures} hỏng, {errors} lỗi')
    if skipped:
        problems.append(f'{skipped} bị bỏ qua (bỏ qua không phải là đạt)')
    if passed < 1:
        problems.append('không kiểm thử nào đạt')
    text = ', '.join(f'{tests[k]} {k}' for k in COUNTS)
    c.add('-', check.GPU_TESTS, not problems, f'pytest -m gpu: {"; ".join([text, *problems])}')


def gpu_present(c: Checker) -> None:
    names = [g.get('name') for g in c.machine.get('gpus') or [] if isinstance(g, dict)]
    why = 'TensorFlow không thấy GPU'
    if (c.run.get('software') or {}).get('tensorflow') is None:  # no env_report reached summary
        why = 'không có báo cáo môi trường: đợt chạy dừng trước khi ghi nó'
    detail = f'machine.gpus: {len(names)} GPU ({", ".join(map(str, names))})'
    detail = detail if names else f'lần chạy không đo GPU nào ({why})'
    c.add('-', check.HAS_GPU, bool(names), detail)
    for name, keys in (
        (check.EX1, ('gflops',)),
        (check.CHOOSE, ('gflops', 'bandwidth_gbs', 'dtype_gflops')),
    ):
        tables = {k: list(c.results(name)[k]) for k in keys if k in c.results(name)}
        missing = [f'{k} chỉ có {ls}' for k, ls in tables.items() if not any(map(gpu_device, ls))]
        found = sorted({gpu_device(d) for labels in tables.values() for d in labels} - {None})
        what = 'thiếu hàng GPU' if found else 'lần chạy không đo GPU nào'
        detail = f'{what}: {"; ".join(missing)}' if missing else f'có số đo của {", ".join(found)}'
        if tables:
            c.add(name, check.HAS_GPU, not missing, detail)
    for name, keys, least in (
        (check.EX2, ('devices',), 1),
        (check.EX3, ('device',), 1),
        (check.EX4, ('devices',), 1),
        (check.DP, ('devices',), 1),
        (check.USE, ('devices', 'placed', 'placements', 'mirrored_copies'), 2),
    ):
        results = c.results(name)
        where = {k: strings(results[k]) for k in keys if k in results}
        devices = [d for ds in where.values() for d in ds]
        others = sorted({d for d in devices if not gpu_device(d)})
        used = sorted({gpu_device(d) for d in devices if gpu_device(d)})
        shown = ', '.join(f'{k} = {results[k]!r}' for k in where)
        if not used:
            detail = f'lần chạy không đo GPU nào: {shown}'
        elif others:
            detail = f'không phải GPU: {", ".join(others)} ({shown})'
        elif len(used) < least:
            detail = f'chỉ dùng {", ".join(used)}, cần ít nhất {least} GPU ({shown})'
        else:
            detail = f'mọi vị trí là GPU: {", ".join(used)}'
        if where:
            c.add(name, check.HAS_GPU, bool(used) and not others and len(used) >= least, detail)


def finite(c: Checker) -> None:
    for name in c.run.get('notebooks', {}):
        values = list(measurements(c.results(name)))
        bad = [
            f'{path} = {"null (NaN hoặc vô cực khi lưu)" if v is None else repr(v)}'
            for path, v in values
            if not number(v)
        ]
        shown = ', '.join(bad[:5]) + (' ...' if len(bad) > 5 else '')
        ok = f'{len(values)} số đo thời gian và tốc độ đều hữu hạn, > 0'
        if values:
            c.add(name, check.FINITE, not bad, f'không hữu hạn hoặc ≤ 0: {shown}' if bad else ok)


def equalities(c: Checker) -> None:
    for name in c.run.get('notebooks', {}):
        results = c.results(name)
        for key in check.EQUALITY_KEYS:
            if key in results:
                c.add(name, key, results[key] is True, f'{key} = {results[key]!r}')
        diffs = results.get('max_abs_weight_diff', {})
        for label, value in diffs.items() if isinstance(diffs, dict) else [('', diffs)]:
            ok = number(value) and value < MAX_WEIGHT_DIFF
            need = f'cần < {MAX_WEIGHT_DIFF:g}'
            c.add(name, check.WEIGHT_DIFF, ok, f'{label or "trọng số"}: {value!r} ({need})')


def jit_compile(c: Checker) -> None:
    jit = c.results(check.DP, 'jit_compile').get('jit_compile')
    if jit is not None:
        single, mirrored = jit['single'], jit['mirrored']
        detail = f'jit_compile một thiết bị {single!r}, MirroredStrategy {mirrored!r}'
        c.add(check.DP, check.SAME_JIT, single == mirrored, detail)


RULES = (status, required_keys, gpu_tests, gpu_present, finite, equalities, jit_compile)
