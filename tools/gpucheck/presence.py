"""What a run holds: every notebook ended ok and saved what the checks read, the GPU tests ran
and passed, a GPU was measured everywhere, every figure is a finite number > 0, the equalities
hold.

* ``trạng thái``: every notebook ended ``ok``. ``có notebook`` / ``khóa kết quả``: a run of the
  current notebooks (``collection_version == d2lhelpers.__version__``) has every notebook and
  every key of ``REQUIRED``; older runs skip what they lack.
* ``kiểm thử gpu``: ``pytest -m gpu`` ran (``gpu_tests`` not null), >= 1 test passed, none
  failed, errored or was skipped (a skipped GPU test is a GPU that was not tested).
* ``có GPU``: the run measured a GPU: ``machine.gpus`` is not empty, exercise 1 and choose-a-gpu
  have GPU rows (``gflops``; ``bandwidth_gbs``, ``dtype_gflops``), and every device that
  exercises 2-4, data-parallel and use-gpu placed work on is a GPU (use-gpu: at least two).
  A run on a machine without a GPU fails exactly this check and ``kiểm thử gpu``
  (``NO_GPU_CHECKS``): every other rule is about GPU figures and adds nothing without them.
* ``số đo hữu hạn, > 0``: every timing (keys ending in ``_s``: ``median_s``, ``floor_s``,
  ``step_time_s``, ``step_floor_s``, ``model_parallel_s``...) and every rate (``gflops``,
  ``dtype_gflops``, ``bandwidth_gbs``, ``speedup``, ``..._over_...``) of every notebook is a
  finite number > 0 (``save_results`` writes NaN and infinity as null; ``ceiling_gflops`` and
  ``ridge_point_flop_per_byte`` may be null: no ceiling).
* equalities true (``logs_equal``, ``restored_equal``, ``workers_equal``, ``sums_equal``,
  ``weights_match``), ``max_abs_weight_diff`` < 1e-5 (float32 rounding of the same kernels is
  1e-7..1e-6); ``cùng jit_compile`` on both sides of data-parallel.
"""

from __future__ import annotations

from .check import (
    CHOOSE,
    DP,
    EQUALITY_KEYS,
    EX1,
    EX2,
    EX3,
    EX4,
    FINITE,
    GPU_TESTS,
    HAS_GPU,
    HAS_NOTEBOOK,
    KEYS,
    MAX_WEIGHT_DIFF,
    PLACEMENT_KEYS,
    REQUIRED,
    SAME_JIT,
    STATUS,
    USE,
    WEIGHT_DIFF,
    Checker,
    _count,
    _dict,
    _gpu_devices,
    _number,
    _strings,
    gpu_device,
    measurements,
)


def status(c: Checker) -> None:
    for name, entry in c.run.get('notebooks', {}).items():
        status = entry.get('status')
        c.add(name, STATUS, status == 'ok', f'status {status!r}')


def required_keys(c: Checker) -> None:
    if not c.current:
        return
    for name, keys in REQUIRED.items():
        results = c.results(name)
        if results is None:
            c.add(name, HAS_NOTEBOOK, False, 'lần chạy không có notebook này')
            continue
        for key in keys:
            c.has(name, KEYS, results, key)


def gpu_tests(c: Checker) -> None:
    if 'gpu_tests' not in c.run and not c.current:
        return
    tests = c.run.get('gpu_tests')
    if tests is None:
        c.add('-', GPU_TESTS, False, 'gpu_tests = null: pytest -m gpu chưa chạy')
        return
    counts = {k: _dict(tests).get(k) for k in ('passed', 'failed', 'skipped', 'errors')}
    if not all(_count(v) for v in counts.values()):
        c.add('-', GPU_TESTS, False, f'gpu_tests không hợp lệ: {tests!r}')
        return
    problems = []
    if counts['failed'] or counts['errors']:
        problems.append(f'{counts["failed"]} hỏng, {counts["errors"]} lỗi')
    if counts['skipped']:
        problems.append(f'{counts["skipped"]} bị bỏ qua (bỏ qua không phải là đạt)')
    if counts['passed'] < 1:
        problems.append('không kiểm thử nào đạt')
    text = ', '.join(f'{v} {k}' for k, v in counts.items())
    c.add(
        '-',
        GPU_TESTS,
        not problems,
        f'pytest -m gpu: {text}' + (f': {"; ".join(problems)}' if problems else ''),
    )


def gpu_present(c: Checker) -> None:
    names = [g.get('name') for g in c.machine.get('gpus') or [] if isinstance(g, dict)]
    why = 'TensorFlow không thấy GPU'
    if (c.run.get('software') or {}).get('tensorflow') is None:  # no env_report reached summary
        why = 'không có báo cáo môi trường: đợt chạy dừng trước khi ghi nó'
    c.add(
        '-',
        HAS_GPU,
        bool(names),
        f'machine.gpus: {len(names)} GPU ({", ".join(map(str, names))})'
        if names
        else f'lần chạy không đo GPU nào: machine.gpus rỗng ({why})',
    )
    for name, keys in (
        (EX1, ('gflops',)),
        (CHOOSE, ('gflops', 'bandwidth_gbs', 'dtype_gflops')),
    ):
        results = c.results(name)
        tables = {k: results[k] for k in keys if results and isinstance(results.get(k), dict)}
        if not tables:
            continue
        missing = {k: list(t) for k, t in tables.items() if not _gpu_devices(t)}
        found = sorted({d for t in tables.values() for d in _gpu_devices(t)})
        what = 'thiếu hàng GPU' if found else 'lần chạy không đo GPU nào'
        c.add(
            name,
            HAS_GPU,
            not missing,
            f'{what}: ' + '; '.join(f'{k} chỉ có {v}' for k, v in missing.items())
            if missing
            else f'có số đo của {", ".join(found)}',
        )
    for name, keys, least in (
        (EX2, ('devices',), 1),
        (EX3, ('device',), 1),
        (EX4, ('devices',), 1),
        (DP, ('devices',), 1),
        (USE, PLACEMENT_KEYS, 2),
    ):
        results = c.results(name) or {}
        where = {k: _strings(results[k]) for k in keys if k in results}
        if not where:
            continue
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
        c.add(name, HAS_GPU, bool(used) and not others and len(used) >= least, detail)


def finite(c: Checker) -> None:
    for name in c.run.get('notebooks', {}):
        values = list(measurements(c.results(name) or {}))
        if not values:
            continue
        bad = [
            f'{path} = {"null (NaN hoặc vô cực khi lưu)" if v is None else repr(v)}'
            for path, v in values
            if not (_number(v) and v > 0)
        ]
        c.add(
            name,
            FINITE,
            not bad,
            'không hữu hạn hoặc ≤ 0: ' + ', '.join(bad[:5]) + (' ...' if len(bad) > 5 else '')
            if bad
            else f'{len(values)} số đo thời gian và tốc độ đều hữu hạn, > 0',
        )


def equalities(c: Checker) -> None:
    for name in c.run.get('notebooks', {}):
        results = c.results(name) or {}
        for key in EQUALITY_KEYS:
            if key in results:
                value = results[key]
                c.add(name, key, value is True, f'{key} = {value!r}')
        if 'max_abs_weight_diff' in results:
            diffs = results['max_abs_weight_diff']
            items = diffs.items() if isinstance(diffs, dict) else [('', diffs)]
            for label, value in items:
                ok = _number(value) and value < MAX_WEIGHT_DIFF
                c.add(
                    name,
                    WEIGHT_DIFF,
                    ok,
                    f'{label or "trọng số"}: {value!r} (cần < {MAX_WEIGHT_DIFF:g})',
                )


def jit_compile(c: Checker) -> None:
    results = c.results(DP) or {}
    jit = results.get('jit_compile')
    if isinstance(jit, dict) and {'single', 'mirrored'} <= jit.keys():
        c.add(
            DP,
            SAME_JIT,
            jit['single'] == jit['mirrored'],
            f'jit_compile một thiết bị {jit["single"]!r}, MirroredStrategy {jit["mirrored"]!r}',
        )


RULES = (
    status,
    required_keys,
    gpu_tests,
    gpu_present,
    finite,
    equalities,
    jit_compile,
)
