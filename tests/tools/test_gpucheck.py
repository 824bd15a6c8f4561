"""gpucheck.check, the acceptance checks (recorder, pages, command line: test_record_page.py).

No GPU and no TensorFlow needed: the checks are pure functions over a run dict. The 2026-11-30 H200
run (old notebooks) must be rejected for the reasons its page (docs/runs/) gives; a physically
consistent run of the current notebooks (tests/tools/gpufixtures.py) must be accepted; for each
rule, a copy of it with one defect must be rejected by that rule; a run without a GPU must be
rejected by the GPU presence checks and by nothing else.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
from pathlib import Path

import pytest
from gpucheck import check, order
from gpufixtures import GPU, H100, T4, build_run

ROOT = Path(__file__).resolve().parents[2]
RUN_FILE = ROOT / 'd2lhelpers' / 'runs' / 'h200-2026-11-30.json'
EX1, EX2, EX3, EX4 = check.EX1, check.EX2, check.EX3, check.EX4
CHOOSE, DP, USE = check.CHOOSE, check.DP, check.USE


def old_run() -> dict:
    return json.loads(RUN_FILE.read_text(encoding='utf-8'))


def failures(run: dict) -> list[check.Finding]:
    return check.failed(check.check_run(run))


def fails(run: dict, notebook: str, name: str) -> list[check.Finding]:
    return [f for f in failures(run) if f.notebook == notebook and f.check == name]


def results(run: dict, notebook: str) -> dict:
    return run['notebooks'][notebook]['results']


# -- the checks: the old run is rejected, a valid one accepted ---------------------------------


def test_old_h200_run_is_rejected_for_the_known_artefacts():
    bad = failures(old_run())
    text = '\n'.join(f'{f.notebook} | {f.check} | {f.detail}' for f in bad)
    tf32 = [f for f in bad if f.notebook == EX1 and f.check == check.FP32_PEAK]
    assert tf32 and 'n = 2048: 248.6 TFLOP/s' in tf32[0].detail, text
    assert '67 TFLOP/s' in tf32[0].detail
    assert any(f.notebook == EX1 and f.check == check.OFF_FLOOR for f in bad), text
    assert any(f.notebook == EX4 and '1.27x' in f.detail for f in bad), text
    assert any(f.notebook == CHOOSE and f.check == check.TF32_GAIN for f in bad), text
    assert "không có khóa 'floor_s'" in text  # 0.2.0 saved less than today's notebooks
    assert not any(f.check == check.RULE_ERROR for f in bad), text  # every rule could read it
    # what the old run got right passes; what it cannot show is unchecked
    findings = check.check_run(old_run())
    ok = [f for f in findings if f.status == check.OK]
    assert any(f.notebook == CHOOSE and f.check == check.BANDWIDTH for f in ok)
    assert any(f.check == check.WEIGHT_DIFF for f in ok)
    ceiling = [f for f in findings if f.notebook == CHOOSE and f.check == check.CEILING]
    assert ceiling and ceiling[0].status == check.UNCHECKED  # its sizes stop at n = 1024


def test_valid_run_is_accepted():
    findings = check.check_run(build_run())
    assert not check.failed(findings), check.table(check.failed(findings))
    unchecked = [f for f in findings if f.status == check.UNCHECKED]
    assert not unchecked, check.table(unchecked)
    names = ['STATUS', 'GPU_TESTS', 'HAS_GPU', 'FP32_PEAK', 'FP32_LOW', 'TF32_GAIN']
    names += ['BANDWIDTH', 'OFF_FLOOR', 'CEILING', 'ORDER', 'FINITE', 'SPEEDUP', 'SAME_JIT']
    rules = {getattr(check, name) for name in names} | {check.WEIGHT_DIFF, *check.EQUALITY_KEYS}
    assert rules <= {f.check for f in findings}


def test_a_run_without_a_gpu_fails_exactly_the_gpu_presence_checks():
    bad = failures(build_run(gpu=None))
    assert {f.check for f in bad} == check.NO_GPU_CHECKS, check.table(bad)
    no_gpu = [f for f in bad if f.check == check.HAS_GPU]
    assert {f.notebook for f in no_gpu} == {'-', *check.REQUIRED}
    assert all('lần chạy không đo GPU nào' in f.detail for f in no_gpu), check.table(no_gpu)


def test_a_t4_run_is_accepted_with_its_own_data_sheet():
    findings = check.check_run(build_run(T4))  # 230 GB/s = 72% of 320, 4.5 = 56% of 8.1
    assert not check.failed(findings), check.table(check.failed(findings))
    assert not [f for f in findings if f.check == check.TF32_GAIN]  # no TF32 on a T4


# -- each rule can fail ------------------------------------------------------------------------


def test_status_must_be_ok():
    run = build_run()
    run['notebooks'][EX2]['status'] = 'timeout'
    assert fails(run, EX2, 'trạng thái')


@pytest.mark.parametrize(
    'tests',
    [
        None,  # pytest -m gpu did not run
        {'passed': 0, 'failed': 0, 'skipped': 2, 'errors': 0},  # no GPU: skipped is not passed
        {'passed': 1, 'failed': 0, 'skipped': 1, 'errors': 0},
        {'passed': 1, 'failed': 1, 'skipped': 0, 'errors': 0},
        {'passed': 2, 'failed': 0, 'skipped': 0, 'errors': 1},
        {'passed': 0, 'failed': 0, 'skipped': 0, 'errors': 0},
    ],
)
def test_gpu_tests_must_run_and_pass(tests):
    run = build_run()
    run['gpu_tests'] = tests
    assert fails(run, '-', check.GPU_TESTS)


@pytest.mark.parametrize(
    'tests', [{'passed': 2}, {'passed': 2, 'failed': 'x', 'skipped': 0, 'errors': 0}, [2, 0]]
)
def test_gpu_tests_of_the_wrong_shape_fail_the_run_naming_the_rule(tests):
    run = build_run()
    run['gpu_tests'] = tests
    assert any('gpu_tests' in f.detail for f in fails(run, '-', check.RULE_ERROR))


def test_gpu_tests_missing_from_a_current_run():
    run = build_run()
    del run['gpu_tests']
    assert fails(run, '-', check.GPU_TESTS)


def no_gpu_rows(run: dict, notebook: str) -> None:
    """Each notebook's results as if it had measured the CPU only (a placement regression)."""
    r = results(run, notebook)
    if notebook in (EX1, CHOOSE):
        for key in ('gflops', 'median_s', 'bandwidth_gbs', 'dtype_gflops'):
            for label in [k for k in r.get(key, {}) if 'GPU' in k]:
                del r[key][label]
    elif notebook == EX3:
        r['device'] = '/CPU:0'
    elif notebook == EX2:
        r['devices']['original'] = '/CPU:0'  # one restore off the GPU is enough
    elif notebook == USE:
        r['placed']['Y_hat'] = '/CPU:0'
    else:
        r['devices'] = ['/GPU:0', '/CPU:0']


@pytest.mark.parametrize('notebook', [EX1, EX2, EX3, EX4, CHOOSE, DP, USE])
def test_every_notebook_must_have_measured_a_gpu(notebook):
    run = build_run()
    no_gpu_rows(run, notebook)
    assert fails(run, notebook, check.HAS_GPU)


def test_the_machine_must_list_a_gpu():
    run = build_run()
    run['machine']['gpus'] = []
    bad = fails(run, '-', check.HAS_GPU)
    assert bad and 'lần chạy không đo GPU nào' in bad[0].detail


def test_use_gpu_must_use_two_gpus():
    run = build_run()
    r = results(run, USE)
    r['devices'], r['mirrored_copies'] = ['/GPU:0', '/GPU:0'], {}
    r['placed'] = dict.fromkeys(r['placed'], '/GPU:0')
    assert fails(run, USE, check.HAS_GPU)
    r['placed']['Y'] = '/GPU:1'
    assert not fails(run, USE, check.HAS_GPU)
    r['placed']['lazy'] = '/CPU:0'
    assert 'CPU:0' in fails(run, USE, check.HAS_GPU)[0].detail


def with_ex1_gpu_times(run: dict, times: dict[str, float]) -> None:
    """Exercise 1's GPU times at some sizes replaced, its GFLOP/s computed from them."""
    r = results(run, EX1)
    for n, t in times.items():
        r['median_s']['TF /GPU:0'][n] = t
        r['gflops']['TF /GPU:0'][n] = 2 * int(n) ** 3 / t / 1e9


def test_unsynchronised_timings_read_above_the_fp32_peak():
    run = build_run()
    with_ex1_gpu_times(run, {'4096': 8e-5, '8192': 9e-5})  # the clock stopped at the launch
    bad = fails(run, EX1, check.FP32_PEAK)
    assert bad and 'n = 8192' in bad[0].detail and 'H100 SXM' in bad[0].detail


def test_tf32_labelled_float32_reads_above_the_fp32_peak():
    run = build_run()
    r = results(run, CHOOSE)
    tf32 = r['dtype_gflops']['/GPU:0']['tf32']
    r['dtype_gflops']['/GPU:0']['float32'] = tf32
    assert fails(run, CHOOSE, check.FP32_PEAK)


@pytest.mark.parametrize('notebook', [EX1, EX3, EX4, CHOOSE, DP])
def test_tf32_flag_where_float32_is_claimed(notebook):
    run = build_run()
    results(run, notebook)['tf32'] = True
    assert fails(run, notebook, check.FP32_PEAK)


def test_exercise_4_faster_than_the_fp32_peak():
    run = build_run()
    results(run, EX4)['median_s']['sequential'] = 5e-3  # 864 GFLOP in 5 ms: 173 TFLOP/s
    assert fails(run, EX4, check.FP32_PEAK)


def test_a_data_parallel_step_faster_than_the_fp32_peak():
    run = build_run()
    results(run, DP)['step_time_s']['1'] = 1e-3  # 118 GFLOP in 1 ms
    assert fails(run, DP, check.FP32_PEAK)


def test_float32_far_below_the_data_sheet():
    run = build_run(dataclasses.replace(H100, fp32=6_700.0))  # 10%: idle clocks
    assert fails(run, EX1, check.FP32_LOW)
    assert fails(run, CHOOSE, check.FP32_LOW)


def test_float32_below_n_2048_is_not_judged_against_the_peak():
    run = build_run()
    for key in ('median_s', 'gflops'):
        row = results(run, EX1)[key]['TF /GPU:0']
        for n in ('2048', '4096', '8192'):
            del row[n]
    low = [f for f in check.check_run(run) if f.notebook == EX1 and f.check == check.FP32_LOW]
    assert low and all(f.status == check.UNCHECKED for f in low)


def test_no_ceiling_means_every_gpu_point_at_the_floor():
    run = build_run()
    results(run, CHOOSE)['ceiling_gflops']['/GPU:0'] = None
    assert fails(run, CHOOSE, check.CEILING)
    assert not fails(run, CHOOSE, check.FINITE)  # a null ceiling is a verdict, not a NaN


def test_largest_gpu_point_at_the_floor():
    run = build_run()
    with_ex1_gpu_times(run, {'8192': 7.2e-5})  # 1.1x the 65 µs floor
    assert fails(run, EX1, check.OFF_FLOOR)
    run = build_run()
    results(run, CHOOSE)['floor_s']['/GPU:0'] = 0.025  # n = 8192 takes 27.6 ms: 1.1x
    assert fails(run, CHOOSE, check.CEILING)


def test_floor_rule_needs_no_data_sheet():
    run = build_run(dataclasses.replace(H100, name='NVIDIA B200'))
    with_ex1_gpu_times(run, {'8192': 7.2e-5})
    assert fails(run, EX1, check.OFF_FLOOR)
    assert not fails(run, EX1, check.FP32_PEAK)  # unchecked without a row


def test_time_must_grow_with_the_work():
    run = build_run()
    with_ex1_gpu_times(run, {'8192': 4.0e-3})  # 4096 took 3.5 ms: 8x the work, 1.15x the time
    bad = fails(run, EX1, check.OFF_FLOOR)
    assert bad and 'từ n = 4096 đến n = 8192' in bad[0].detail and 'lớn nhất vẫn' in bad[0].detail


def test_tf32_gain_needs_a_quarter_of_the_data_sheet_ratio():
    a100 = GPU('NVIDIA A100-SXM4-80GB', '8.0', 81920.0, 17_000.0, 20_400.0, 200_000.0, 1_750.0)
    bad = fails(build_run(a100), CHOOSE, check.TF32_GAIN)  # 1.2x where the sheet says 8x
    assert bad and 'cần ≥ 2.75x' in bad[0].detail
    assert not failures(build_run(dataclasses.replace(a100, tf32=100_000.0)))


def test_geforce_tf32_equal_to_float32_is_accepted():
    rtx = GPU('NVIDIA GeForce RTX 4090', '8.9', 24564.0, 50_000.0, 50_000.0, 140_000.0, 900.0)
    findings = check.check_run(build_run(rtx))  # dense TF32 = FP32 = 82.6 TFLOP/s
    assert not check.failed(findings), check.table(check.failed(findings))
    assert any(f.check == check.TF32_GAIN and f.status == check.OK for f in findings)
    slower = dataclasses.replace(rtx, tf32=40_000.0)  # 0.8x: TF32 slower than float32
    assert fails(build_run(slower), CHOOSE, check.TF32_GAIN)


def test_tf32_row_missing_where_the_gpu_has_tf32():
    run = build_run()
    del results(run, CHOOSE)['dtype_gflops']['/GPU:0']['tf32']
    assert fails(run, CHOOSE, check.TF32_GAIN)


@pytest.mark.parametrize('gbs', [1500.0, 3500.0])  # 45% and 104% of 3350 GB/s
def test_bandwidth_within_the_data_sheet(gbs):
    run = build_run()
    results(run, CHOOSE)['bandwidth_gbs']['/GPU:0'] = gbs
    assert fails(run, CHOOSE, check.BANDWIDTH)


def test_a_mixed_host_is_judged_gpu_by_gpu():
    run = build_run(H100, T4)  # GPU 1 a T4: its 230 GB/s is 72% of the T4's 320
    assert results(run, EX4)['speedup'] < 0.3  # half the work on the T4
    assert not failures(run), check.table(failures(run))
    results(run, CHOOSE)['bandwidth_gbs']['/GPU:1'] = 2900.0  # fine for an H100, not a T4
    bad = fails(run, CHOOSE, check.BANDWIDTH)
    assert len(bad) == 1 and '/GPU:1' in bad[0].detail and 'T4' in bad[0].detail


def test_two_gpus_of_one_model_must_not_slow_each_other():
    run = build_run(H100, H100)
    assert results(run, EX4)['speedup'] > 1.9
    assert not failures(run), check.table(failures(run))
    for speedup in (0.5, 2.5):  # interfering; more than two GPUs can give
        results(run, EX4)['speedup'] = speedup
        assert fails(run, EX4, check.SPEEDUP), speedup


@pytest.mark.parametrize(
    'name', ['NVIDIA A100-SXM4-40GB MIG 1g.5gb', 'NVIDIA B200'], ids=['MIG', 'unknown']
)
def test_a_gpu_without_a_data_sheet_row_is_unchecked_not_ok(name):
    run = build_run(dataclasses.replace(H100, name=name))
    findings = check.check_run(run)
    assert not check.failed(findings), check.table(check.failed(findings))
    sheet = {check.FP32_PEAK, check.FP32_LOW, check.TF32_GAIN, check.BANDWIDTH}
    judged = [f for f in findings if f.check in sheet]
    assert judged and all(f.status == check.UNCHECKED for f in judged)
    assert 'chưa kiểm' in check.table(findings).splitlines()[-1]
    if 'MIG' in name:
        assert 'MIG' in judged[0].detail


@pytest.mark.parametrize(
    'notebook, path, value',
    [
        (EX3, ('median_s', 'tf_function'), None),  # save_results writes NaN as null
        (EX1, ('median_s', 'TF /GPU:0', '8192'), math.nan),
        (EX2, ('median_s', 'floor'), 0.0),
        (DP, ('step_time_s', '2'), 0.0),
        (DP, ('model_parallel_s', 'hai thiết bị'), [1.8e-3, -1.0]),
        (EX4, ('speedup',), math.inf),
        (CHOOSE, ('bandwidth_gbs', '/GPU:0'), None),
        (EX3, ('host_every_step_over_device_once',), None),
    ],
)
def test_every_timing_and_rate_is_finite_and_positive(notebook, path, value):
    run = build_run()
    where = results(run, notebook)
    for key in path[:-1]:
        where = where[key]
    where[path[-1]] = value
    bad = fails(run, notebook, check.FINITE)
    assert bad and path[-1] in bad[0].detail


@pytest.mark.parametrize('value', [0.0, -1.0, None, math.nan, 'x'])
def test_any_bad_measurement_is_named_and_nothing_crashes(value):
    run = build_run()
    paths = [(nb, p) for nb in run['notebooks'] for p, _ in check.measurements(results(run, nb))]
    assert len(paths) > 100
    for notebook, path in paths:
        bad = copy.deepcopy(run)
        keys = path.replace('[', '.[').split('.')
        where = results(bad, notebook)
        for key in keys[:-1]:
            where = where[int(key[1:-1])] if key.startswith('[') else where[key]
        last = keys[-1]
        where[int(last[1:-1]) if last.startswith('[') else last] = value
        found = fails(bad, notebook, check.FINITE)
        if value is None and keys[0] in check.NULLABLE_KEYS:  # no ceiling: a verdict
            assert not found, (notebook, path)
        else:
            assert found and path in found[0].detail, (notebook, path)


@pytest.mark.parametrize(
    'notebook, key, more, less',
    [
        (EX2, 'median_s', 'via_host', 'on_device'),
        (EX2, 'median_s', 'on_device', 'floor'),
        (EX3, 'median_s', 'host_every_step', 'device_once'),
        (EX3, 'median_s', 'tf_function', 'no_logging'),
        (EX3, 'median_s', 'device_once', 'eager_no_logging'),
    ],
)
def test_more_work_is_not_faster(notebook, key, more, less):
    run = build_run()
    times = results(run, notebook)[key]
    times[more] = 0.5 * times[less]
    assert fails(run, notebook, check.ORDER)


def test_a_data_parallel_step_is_not_faster_than_its_floor():
    run = build_run()
    results(run, DP)['step_time_s']['1'] = 2e-4  # floor 400 µs
    assert fails(run, DP, check.ORDER)
    run = build_run()
    results(run, DP)['model_parallel_s']['một thiết bị'][0] = 3e-5  # floor 60 µs
    assert fails(run, DP, check.ORDER)


@pytest.mark.parametrize(
    'notebook, key',
    [
        (EX2, 'restored_equal'),
        (EX3, 'logs_equal'),
        (EX4, 'sums_equal'),
        (DP, 'workers_equal'),
        (DP, 'weights_match'),
    ],
)
def test_equalities_must_hold(notebook, key):
    run = build_run()
    results(run, notebook)[key] = False
    assert fails(run, notebook, key)


def test_weight_difference_below_1e_5():
    run = build_run()
    results(run, DP)['max_abs_weight_diff']['fit'] = 2e-5
    assert fails(run, DP, 'max_abs_weight_diff')
    results(run, DP)['max_abs_weight_diff']['fit'] = math.nan
    assert fails(run, DP, 'max_abs_weight_diff')


def test_same_compiler_on_both_sides():
    run = build_run()
    results(run, DP)['jit_compile'] = {'single': True, 'mirrored': False}
    assert fails(run, DP, 'cùng jit_compile')


@pytest.mark.parametrize('speedup', [0.7, 1.27])
def test_split_gpu_speedup_near_one(speedup):
    run = build_run()
    results(run, EX4)['speedup'] = speedup
    assert fails(run, EX4, 'tăng tốc bài 4')


def test_crossover_must_agree_with_the_medians():
    run = build_run()
    r = results(run, EX1)
    n = r['crossover_n']
    assert n in r['near_floor']['TF /GPU:0']  # the eager crossover sits at the GPU's floor: fine
    assert not fails(run, EX1, 'điểm giao')
    r['crossover_n'] = 64  # the CPU still wins there
    assert '64' in fails(run, EX1, 'điểm giao')[0].detail
    r['crossover_n'] = 100  # not a measured size
    assert fails(run, EX1, 'điểm giao')
    r['crossover_n'] = None
    assert not [f for f in check.check_run(run) if f.check == 'điểm giao']


def test_a_missing_key_fails_the_run_and_the_rule_that_reads_it_stays_quiet():
    run = build_run()
    del results(run, EX4)['split']
    bad = failures(run)
    assert [(f.notebook, f.detail) for f in bad] == [(EX4, "không có khóa 'split' trong kết quả")]


def test_a_value_of_the_wrong_shape_fails_with_the_rule_and_the_other_rules_run():
    run = build_run()
    results(run, EX4)['median_s'] = [1e-3, 2e-3]  # a list where the rule reads a dict
    bad = failures(run)
    assert [f.check for f in bad] == [check.RULE_ERROR] and 'timed_work' not in bad[0].detail
    assert 'fp32_peak' in bad[0].detail and 'AttributeError' in bad[0].detail
    assert any(f.check == check.SPEEDUP and f.status == check.OK for f in check.check_run(run))


def test_a_missing_notebook_fails_the_run():
    run = build_run()
    del run['notebooks'][USE]
    assert fails(run, USE, 'có notebook')


def test_gpu_device_of_a_label():
    assert check.gpu_device('TF /GPU:1') == '/GPU:1'
    assert check.gpu_device('/job:localhost/replica:0/task:0/device:GPU:0') == '/GPU:0'
    assert check.gpu_device('NumPy (CPU)') is None and check.gpu_device(None) is None


def test_findings_table():
    findings = [
        check.Finding(EX4, 'tăng tốc bài 4', check.FAILED, '1.27x'),
        check.Finding(CHOOSE, 'băng thông so với data sheet', check.OK, '87%'),
        check.Finding(CHOOSE, 'TF32 nhanh hơn float32', check.UNCHECKED, 'B200'),
    ]
    text = check.table(findings)
    assert 'HỎNG' in text and EX4 in text and text.splitlines()[0].startswith('notebook')
    assert 'chưa kiểm' in text.splitlines()[3]
    assert text.splitlines()[-1] == 'tổng: 3 kiểm tra: 1 đạt, 1 hỏng, 1 chưa kiểm'
    assert check.failed(findings) == findings[:1]


def test_scaling_rule():
    flat = [(16, 6.7e-5), (512, 6.5e-5), (2048, 6.9e-5)]
    assert 'mọi điểm đều ở mức sàn' in order.scaling_verdict(flat)
    bent = [(16, 5.1e-5), (512, 7.2e-5), (1024, 8.1e-5)]  # the old choose-a-gpu: 1.58x overall
    assert 'n = 512' in order.scaling_verdict(bent)
    kernel = [(1024, 3.2e-4), (4096, 5.284e-3), (8192, 3.1966e-2)]
    assert order.scaling_verdict(kernel) is None
    cpu = [(16, 4.8e-5), (1024, 2.16e-3), (2048, 1.24e-2)]
    assert order.scaling_verdict(cpu) is None
