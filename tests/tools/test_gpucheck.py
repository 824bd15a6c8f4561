"""gpucheck: the stored H200 run, its generated page, the recorder and the acceptance checks.

No GPU and no TensorFlow needed: the checks are pure functions over a run dict. The 2026-11-30 H200
run (old notebooks) must be rejected for the reasons docs/gpu-h200.md gives; a physically valid
run built from it must be accepted; each rule must be able to fail.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest
from gpucheck import check, page, record

import d2lhelpers

ROOT = Path(__file__).resolve().parents[2]
RUN_FILE = ROOT / 'd2lhelpers' / 'runs' / 'h200-2026-11-30.json'
EX1, EX2, EX3, EX4 = check.EX1, check.EX2, check.EX3, check.EX4
CHOOSE, DP = check.CHOOSE, check.DP


def old_run() -> dict:
    return json.loads(RUN_FILE.read_text(encoding='utf-8'))


def failures(run: dict) -> list[check.Finding]:
    return check.failed(check.check_run(run))


def fails(run: dict, notebook: str, name: str) -> list[check.Finding]:
    return [f for f in failures(run) if f.notebook == notebook and f.check == name]


def valid_run() -> dict:
    """The old run with its wrong figures replaced by physically valid ones (the probes' values),
    as a run of the current notebooks with every key they save."""
    run = old_run()
    run['collection_version'] = d2lhelpers.__version__
    nbs = run['notebooks']
    ex1 = nbs[EX1]['results']
    gpu = {'1024': 0.00032, '4096': 0.005284, '8192': 0.031966}
    ex1['median_s']['TF /GPU:0'] = gpu
    ex1['gflops']['TF /GPU:0'] = {n: 2 * int(n) ** 3 / t / 1e9 for n, t in gpu.items()}
    ex1['floor_s'] = {'TF /GPU:0': 6.5e-5, 'TF /CPU:0': 4.8e-5, 'NumPy (CPU)': 1.7e-6}
    ex1['near_floor'] = {'TF /GPU:0': [], 'TF /CPU:0': [16, 32, 64], 'NumPy (CPU)': [16]}
    ex1['tf32'] = False
    ex1['crossover_n'] = 1024
    ex3 = nbs[EX3]['results']
    ex3['floor_s'] = {'graph': 0.0411, 'eager': 0.0642}
    ex3['tf32'] = False
    ex4 = nbs[EX4]['results']
    ex4.update(n=6000, speedup=0.99, split=True, sums_equal=True, tf32=False)
    ex4['median_s'] = {'sequential': 0.01924, 'concurrent': 0.01943, 'unordered_one_device': 0.0192}
    ch = nbs[CHOOSE]['results']
    ch['gflops']['/GPU:0'] = {'1024': 6710.0, '4096': 26010.0, '8192': 34400.0}
    ch['dtype_gflops']['/GPU:0'] = {
        'float32': 34400.0,
        'tf32': 210000.0,
        'float16': 420000.0,
        'bfloat16': 410000.0,
    }
    ch['ceiling_gflops'] = {'/GPU:0': 34400.0, '/CPU:0': 982.33}
    ch['floor_s'] = {'/GPU:0': 6.5e-5, '/CPU:0': 4.8e-5}
    ch['near_floor'] = {'/GPU:0': [], '/CPU:0': [16, 32]}
    ch['tf32'] = False
    ch['ridge_point_flop_per_byte']['/GPU:0'] = 8.76
    dp = nbs[DP]['results']
    dp['weights_match'] = True
    dp['jit_compile'] = {'single': False, 'mirrored': False}
    for nb in nbs.values():
        nb['artefacts'] = {}
    return run


# -- the stored run and its page ---------------------------------------------------------------


def test_committed_page_is_the_generated_one():
    assert page.PAGE.read_text(encoding='utf-8') == page.render(page.load_run()), (
        'docs/gpu-h200.md differs from its run: PYTHONPATH=tools python -m gpucheck.page'
    )
    assert page.main(['--check']) == 0


def test_every_artefact_key_exists_in_its_results():
    for name, nb in old_run()['notebooks'].items():
        for key in nb.get('artefacts', {}):
            page.lookup(nb['results'], key)  # KeyError names a key that is not there
        for reason in nb.get('artefacts', {}).values():
            assert reason.strip(), name


def test_run_file_schema():
    run = old_run()
    assert list(run) == [
        'id', 'date', 'commit', 'collection_version', 'command', 'machine', 'software', 'notes',
        'notebooks',
    ]  # fmt: skip
    assert run['id'] == RUN_FILE.stem and run['collection_version'] == '0.2.0'
    assert set(run['machine']) == {
        'gpu', 'gpu_count', 'compute_capability', 'gpu_memory', 'driver', 'cuda_libraries',
        'cpu_cores', 'platform', 'python',
    }  # fmt: skip
    assert set(run['software']) == {'tensorflow', 'tf_cuda', 'cudnn', 'keras', 'numpy'}
    allowed = {'status', 'seconds', 'parameters', 'headline', 'results', 'artefacts', 'probe'}
    for name, nb in run['notebooks'].items():
        assert not name.endswith('.ipynb')
        assert {'status', 'seconds', 'parameters', 'headline', 'results', 'artefacts'} <= set(nb)
        assert set(nb) <= allowed | {'probe_source'}
        assert ('probe' in nb) == ('probe_source' in nb)

    def leaves(x):
        if isinstance(x, dict):
            for v in x.values():
                yield from leaves(v)
        elif isinstance(x, list):
            for v in x:
                yield from leaves(v)
        else:
            yield x

    assert all(x is None or isinstance(x, (str, int, float, bool)) for x in leaves(run))
    assert RUN_FILE.read_text(encoding='utf-8') == record.dumps(run)  # indent 1, as written


def test_page_formats_values_by_key_name():
    assert page.fmt(6.9e-05, ['median_s', 'TF /GPU:0', '2048']) == '69.0 µs'
    assert page.fmt(0.0395, ['median_s', 'no_logging']) == '39.500 ms'
    assert page.fmt(1.2684, ['speedup']) == '1.27x'
    assert page.fmt(3927.64, ['bandwidth_gbs', '/GPU:0']) == '3927.6 GB/s'
    assert page.fmt({'32': 1.0, '4': 2.0}, ['gflops']) == '4: 2.0 GFLOP/s, 32: 1.0 GFLOP/s'


# -- record ------------------------------------------------------------------------------------


def synthetic_summary() -> dict:
    return {
        'commit': 'abc1234',
        'machine': {'platform': 'Linux-x86_64', 'python': '3.11.9', 'cores': 8},
        'environment': {
            'tensorflow': '2.21.0',
            'keras': '3.15.1',
            'numpy': '2.4.6',
            'built_with_cuda': True,
            'cuda': '12.5.1',
            'cudnn': '9',
            'physical': ['/CPU:0', '/GPU:0'],
            'logical': ['/CPU:0', '/GPU:0', '/GPU:1'],
            'tf32': False,
            'gpus': [
                {
                    'device': '/GPU:0',
                    'name': 'Tesla T4',
                    'compute_capability': '7.5',
                    'physical': 0,
                    'memory_total': '15360 MiB',
                    'memory_limit_mb': None,
                }
            ],
        },
        'wall_seconds': 300.0,
        'command': 'python -m nbrun notebooks exercises --out build/x',
        'notebooks': [
            {
                'notebook': 'exercises/04-two-gpu-matmul.ipynb',
                'status': 'ok',
                'seconds': 20.5,
                'parameters': {'n': 6000},
                'results': {'speedup': 0.98, 'split': True},
                'headline': 'tăng tốc 0.98x',
            },
            {'notebook': 'notebooks/use-gpu.ipynb', 'status': 'failed', 'seconds': 3.0},
        ],
    }


def test_record_writes_the_schema(tmp_path):
    build = tmp_path / 'build'
    build.mkdir()
    (build / 'summary.json').write_text(json.dumps(synthetic_summary()), encoding='utf-8')
    smi = [{'driver': '550.54.15', 'name': 'Tesla T4', 'memory': '15360 MiB'}]
    out = tmp_path / 'runs'
    path = record.record(build, 't4-2027-01-15', out=out, smi=smi)
    assert path == out / 't4-2027-01-15.json'
    run = json.loads(path.read_text(encoding='utf-8'))
    assert run['date'] == '2027-01-15' and run['commit'] == 'abc1234'
    assert run['collection_version'] == d2lhelpers.__version__
    assert run['machine'] == {
        'gpu': 'Tesla T4',
        'gpu_count': 1,
        'compute_capability': '7.5',
        'gpu_memory': '15360 MiB',
        'driver': '550.54.15',
        'cuda_libraries': None,
        'cpu_cores': 8,
        'platform': 'Linux-x86_64',
        'python': '3.11.9',
    }
    assert run['software'] == {
        'tensorflow': '2.21.0',
        'tf_cuda': '12.5.1',
        'cudnn': '9',
        'keras': '3.15.1',
        'numpy': '2.4.6',
    }
    ex4 = run['notebooks']['exercises/04-two-gpu-matmul']
    assert ex4 == {
        'status': 'ok',
        'seconds': 20.5,
        'parameters': {'n': 6000},
        'headline': 'tăng tốc 0.98x',
        'results': {'speedup': 0.98, 'split': True},
        'artefacts': {},
    }
    assert run['notebooks']['notebooks/use-gpu']['results'] == {}
    assert all('probe' not in nb for nb in run['notebooks'].values())
    # refuses to overwrite, unless forced; --driver wins over nvidia-smi
    with pytest.raises(record.RecordError, match='--force'):
        record.record(build, 't4-2027-01-15', out=out, smi=smi)
    assert record.main([str(build), '--id', 't4-2027-01-15', '--out', str(out)]) == 1
    record.record(build, 't4-2027-01-15', out=out, smi=smi, driver='555', force=True)
    assert json.loads(path.read_text('utf-8'))['machine']['driver'] == '555'
    assert sorted(p.name for p in out.iterdir()) == ['t4-2027-01-15.json']  # no temp file left
    with pytest.raises(record.RecordError, match='summary.json'):
        record.record(tmp_path / 'nowhere', 'x-2027-01-01', out=out, smi=[])


# -- the checks: the old run is rejected, a valid one accepted ---------------------------------


def test_old_h200_run_is_rejected_for_the_known_artefacts():
    bad = failures(old_run())
    text = '\n'.join(f'{f.notebook} | {f.check} | {f.detail}' for f in bad)
    tf32 = [f for f in bad if f.notebook == EX1 and f.check == 'float32 ≤ đỉnh FP32']
    assert tf32 and '2048' in tf32[0].detail and '248.6 TFLOP/s' in tf32[0].detail, text
    assert '67 TFLOP/s' in tf32[0].detail
    assert any(f.notebook == CHOOSE and f.check == 'trần không ở mức sàn' for f in bad), text
    assert any(f.notebook == EX1 and f.check == 'không ở mức sàn' for f in bad), text
    assert any(f.notebook == EX1 and f.check == 'điểm giao' and '256' in f.detail for f in bad)
    assert any(f.notebook == EX4 and '1.27x' in f.detail for f in bad), text
    # what the old run got right passes
    ok = [f for f in check.check_run(old_run()) if f.ok]
    assert any(f.notebook == CHOOSE and f.check.startswith('băng thông') for f in ok)
    assert any(f.check == 'max_abs_weight_diff' for f in ok)
    # missing keys of the current notebooks are not held against an old run
    assert not any('không có khóa' in f.detail for f in bad)


def test_valid_run_is_accepted():
    findings = check.check_run(valid_run())
    assert not check.failed(findings), check.table(check.failed(findings))
    names = {f.check for f in findings}
    assert {'TF32 nhanh hơn float32', 'cùng jit_compile', 'sums_equal', 'điểm giao'} <= names


# -- each rule can fail ------------------------------------------------------------------------


def test_status_must_be_ok():
    run = valid_run()
    run['notebooks'][EX2]['status'] = 'timeout'
    assert fails(run, EX2, 'trạng thái')


def test_tf32_flag_where_float32_is_claimed():
    run = valid_run()
    run['notebooks'][EX1]['results']['tf32'] = True
    assert fails(run, EX1, 'float32 ≤ đỉnh FP32')


def test_float32_above_the_fp32_peak():
    run = valid_run()
    run['notebooks'][CHOOSE]['results']['dtype_gflops']['/GPU:0']['float32'] = 80000.0
    assert fails(run, CHOOSE, 'float32 ≤ đỉnh FP32')


def test_tf32_must_be_clearly_faster_than_float32():
    run = valid_run()
    run['notebooks'][CHOOSE]['results']['dtype_gflops']['/GPU:0']['tf32'] = 40000.0
    assert fails(run, CHOOSE, 'TF32 nhanh hơn float32')
    run['machine']['compute_capability'] = '7.5'  # no TF32 before Ampere: not checked
    assert not fails(run, CHOOSE, 'TF32 nhanh hơn float32')


def test_tf32_gain_at_the_largest_size():
    run = valid_run()
    rows = run['notebooks'][CHOOSE]['results']['dtype_gflops']['/GPU:0']
    rows['float32'] = {'1024': 6000.0, '8192': 34000.0}
    rows['tf32'] = {'1024': 6100.0, '8192': 40000.0}
    assert fails(run, CHOOSE, 'TF32 nhanh hơn float32')
    rows['tf32']['8192'] = 200000.0
    assert not fails(run, CHOOSE, 'TF32 nhanh hơn float32')


@pytest.mark.parametrize('gbs', [2000.0, 5200.0])
def test_bandwidth_within_the_data_sheet(gbs):
    run = valid_run()
    run['notebooks'][CHOOSE]['results']['bandwidth_gbs']['/GPU:0'] = gbs
    assert fails(run, CHOOSE, 'băng thông so với data sheet')


def test_bandwidth_of_a_t4_at_70_percent_is_fine():
    run = valid_run()
    run['machine'].update(gpu='Tesla T4', compute_capability='7.5')
    ch = run['notebooks'][CHOOSE]['results']
    ch['bandwidth_gbs']['/GPU:0'] = 224.0
    ch['gflops']['/GPU:0'] = {'1024': 3000.0, '4096': 4200.0, '8192': 4400.0}
    ch['dtype_gflops']['/GPU:0'] = {'float32': 4400.0, 'tf32': None, 'float16': 20000.0}
    ch['ceiling_gflops']['/GPU:0'] = 4400.0
    ex1 = run['notebooks'][EX1]['results']
    ex1['gflops']['TF /GPU:0'] = dict(ch['gflops']['/GPU:0'])
    assert not failures(run), check.table(failures(run))


def test_ceiling_at_the_dispatch_floor_with_floors():
    run = valid_run()
    run['notebooks'][CHOOSE]['results']['floor_s']['/GPU:0'] = 0.025  # 8192 takes 32 ms
    assert fails(run, CHOOSE, 'trần không ở mức sàn')
    run = valid_run()
    run['notebooks'][EX1]['results']['floor_s']['TF /GPU:0'] = 0.025
    assert fails(run, EX1, 'không ở mức sàn')


def test_no_ceiling_claimed_is_not_a_failure():
    run = valid_run()
    run['notebooks'][CHOOSE]['results']['ceiling_gflops']['/GPU:0'] = None
    assert not fails(run, CHOOSE, 'trần không ở mức sàn')


def test_scaling_rule_without_floors():
    flat = [(16, 6.7e-5), (512, 6.5e-5), (2048, 6.9e-5)]
    assert 'mức sàn' in check.scaling_verdict(flat)
    bent = [(16, 5.1e-5), (512, 7.2e-5), (1024, 8.1e-5)]  # the old choose-a-gpu: 1.58x overall
    assert 'n = 512' in check.scaling_verdict(bent)
    kernel = [(1024, 3.2e-4), (4096, 5.284e-3), (8192, 3.1966e-2)]
    assert check.scaling_verdict(kernel) is None
    cpu = [(16, 4.8e-5), (1024, 2.16e-3), (2048, 1.24e-2)]
    assert check.scaling_verdict(cpu) is None


def test_equalities_must_hold():
    for notebook, key in [(EX2, 'restored_equal'), (EX3, 'logs_equal'), (EX4, 'sums_equal'),
                          (DP, 'workers_equal'), (DP, 'weights_match')]:  # fmt: skip
        run = valid_run()
        run['notebooks'][notebook]['results'][key] = False
        assert fails(run, notebook, key), key


def test_weight_difference_below_1e_5():
    run = valid_run()
    run['notebooks'][DP]['results']['max_abs_weight_diff']['fit'] = 2e-5
    assert fails(run, DP, 'max_abs_weight_diff')
    run['notebooks'][DP]['results']['max_abs_weight_diff']['fit'] = math.nan
    assert fails(run, DP, 'max_abs_weight_diff')


def test_same_compiler_on_both_sides():
    run = valid_run()
    run['notebooks'][DP]['results']['jit_compile'] = {'single': True, 'mirrored': False}
    assert fails(run, DP, 'cùng jit_compile')


@pytest.mark.parametrize('speedup', [0.7, 1.27])
def test_split_gpu_speedup_near_one(speedup):
    run = valid_run()
    run['notebooks'][EX4]['results']['speedup'] = speedup
    assert fails(run, EX4, 'tăng tốc bài 4')


def test_split_inferred_from_the_machine_and_two_real_gpus():
    run = valid_run()
    del run['notebooks'][EX4]['results']['split']
    run['notebooks'][EX4]['results']['speedup'] = 1.27
    assert fails(run, EX4, 'tăng tốc bài 4')  # one GPU, devices /GPU:0 and /GPU:1
    run['machine']['gpu_count'] = 2
    run['notebooks'][EX4]['results']['split'] = False
    run['notebooks'][EX4]['results']['speedup'] = 1.9
    assert not fails(run, EX4, 'tăng tốc bài 4')
    run['notebooks'][EX4]['results']['speedup'] = 2.5  # more than two devices can give
    assert fails(run, EX4, 'tăng tốc bài 4')


def test_crossover_not_at_the_floor():
    run = valid_run()
    run['notebooks'][EX1]['results']['near_floor']['TF /GPU:0'] = [1024]
    assert fails(run, EX1, 'điểm giao')
    run['notebooks'][EX1]['results']['crossover_n'] = None
    assert not fails(run, EX1, 'điểm giao')


def test_missing_key_fails_only_for_the_current_version(monkeypatch):
    run = valid_run()
    del run['notebooks'][EX4]['results']['sums_equal']
    bad = [f for f in failures(run) if f.notebook == EX4]
    assert any("không có khóa 'sums_equal'" in f.detail for f in bad)
    monkeypatch.setattr(d2lhelpers, '__version__', '9.9.9')  # read at call time
    assert not [f for f in failures(run) if 'không có khóa' in f.detail]


def test_findings_table():
    text = check.table([check.Finding(EX4, 'tăng tốc bài 4', False, '1.27x')])
    assert 'HỎNG' in text and EX4 in text and text.splitlines()[0].startswith('notebook')


def test_valid_run_copy_is_independent():
    a, b = valid_run(), valid_run()
    b['notebooks'][EX1]['results']['tf32'] = True
    assert a['notebooks'][EX1]['results']['tf32'] is False
    assert copy.deepcopy(a) == a


def test_gpu_check_skips_without_a_gpu(monkeypatch, capsys):
    import gpucheck.__main__ as gpu_check

    monkeypatch.setattr(gpu_check, 'gpu_probe', lambda: (0, 'TensorFlow 2.21.0 thấy 0 GPU vật lý'))
    monkeypatch.setattr(gpu_check, '_step', lambda *a: pytest.fail('must not run anything'))
    assert gpu_check.main() == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out == ['gpu-check: bỏ qua — không có GPU (TensorFlow 2.21.0 thấy 0 GPU vật lý)']
