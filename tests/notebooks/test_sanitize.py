"""tests/sanitize.cfg, read by nbval's own parser: it masks measured numbers and nothing else.

Measured figures lose their number and keep their unit; measured verdicts (a word from a closed
list at a fixed place) lose the word and keep the rest of the line; fixed values (thresholds,
ideals and data-sheet figures) stay as they are, so a changed target or data-sheet figure fails
nbval.
"""

from __future__ import annotations

import re

import pytest
from nbtools import PATTERNS, SANITIZE_CFG, sanitize

from d2lhelpers.datasheets import DATASHEETS
from d2lhelpers.timing import BenchmarkResult, Breakdown

TEXT = SANITIZE_CFG.read_text(encoding='utf-8')


def test_nbval_reads_every_pair():
    assert len(PATTERNS) == len(re.findall(r'^regex:', TEXT, flags=re.MULTILINE)) == 11
    assert all(replace.strip() for _, replace in PATTERNS)


@pytest.mark.parametrize(
    'figure, masked',
    [
        ('12.345 ms', '<thời gian>'),
        ('3.2 µs', '<thời gian>'),
        ('1.234 s', '<thời gian>'),
        ('850 ns', '<thời gian>'),
        ('2.5e-05 s', '<thời gian>'),
        ('182.4 GFLOP/s', '<số> GFLOP/s'),
        ('1.3 TFLOP/s', '<số> TFLOP/s'),
        ('12.1 GB/s', '<số> GB/s'),
        ('3.93 TB/s', '<số> TB/s'),
        ('4.6 FLOP/byte', '<số> FLOP/byte'),
        ('1.87x', '<số>x'),
        ('12x', '<số>x'),
        ('82%', '<số>%'),
    ],
)
def test_masks_the_number_and_keeps_the_unit(figure, masked):
    assert sanitize(f'trung vị {figure}, tiếp') == f'trung vị {masked}, tiếp'


def test_a_unit_change_is_still_seen():
    assert sanitize('1.0 GB/s') != sanitize('1.0 TB/s')
    assert sanitize('1.5x') != sanitize('1.5%')
    assert sanitize('12.3 ms') != sanitize('12.3 GFLOP/s') != sanitize('12.3')


def test_a_duration_may_change_its_unit_with_its_value():
    # format_seconds picks the unit from the value: a faster machine prints µs for the same line
    assert sanitize('n = 512: 3.370 ms') == sanitize('n = 512: 912.4 µs')


def test_alignment_spaces_before_a_figure_do_not_count():
    assert sanitize('n = 16:    164.0 µs') == sanitize('n = 16: 1.2 ms')
    assert sanitize('a   12.5x') == sanitize('a 3.0x') == 'a <số>x'


def test_masks_a_benchmark_line():
    line = 'matmul: 12.345 ms ± 0.210 ms (trung vị ± nửa IQR, 5 lần đo), 162.0 GFLOP/s'
    assert sanitize(line) == (
        'matmul: <thời gian> ± <thời gian> (trung vị ± nửa IQR, 5 lần đo), <số> GFLOP/s'
    )


@pytest.mark.parametrize(
    'text',
    [
        '/CPU:0',
        '/GPU:1',
        '1000x1000',
        '2x2',
        'shape=(2, 3)',
        '2 thiết bị',
        '5 lần đo',
        '3 số',
        'loss 0.123456',
        'float32',
        'max |w_i - w_0| = 6.0e-08',
        'TensorFlow 2.21.0, Keras 3.15.1',
        'epoch 3/5',
        'tf.Tensor([1. 2.], shape=(2,), dtype=float32)',
        '/job:localhost/replica:0/task:0/device:CPU:1',
    ],
)
def test_keeps_what_is_not_a_measurement(text):
    assert sanitize(text) == text


@pytest.mark.parametrize(
    'text',
    [
        'mục tiêu: tf_function ≤ 1.2x mức sàn',
        'mục tiêu <= 1.2x',
        'mục tiêu: ≥ 0.9x năng lực song song của máy',
        'băng thông ≥ 80% data sheet',
        'tăng tốc lý tưởng 2x',
        'H200 SXM: 4800 GB/s, 67 TFLOP/s (số liệu từ data sheet)',
        '  median_s.device_once: 421.150 ms (tham khảo)',
        '  probe.speedup_by_n: 2000: 0.72x, 6000: 0.99x (tham khảo)',
    ],
)
def test_keeps_fixed_values(text):
    assert sanitize(text).lstrip('\n') == text  # a reference header gets a blank line above


def test_a_threshold_is_kept_but_the_measurement_beside_it_is_masked():
    line = 'tf_function: 1.07x mức sàn (mục tiêu ≤ 1.2x)'
    assert sanitize(line) == 'tf_function: <số>x mức sàn (mục tiêu ≤ 1.2x)'


@pytest.mark.parametrize('spec', DATASHEETS, ids=lambda s: s.name)
def test_every_data_sheet_row_is_compared_as_it_is(spec):
    assert 'data sheet' in str(spec)
    assert sanitize(str(spec)) == str(spec)


def test_a_measured_line_is_not_protected_by_a_data_sheet_line_below_it():
    text = 'đo được 3.93 TB/s, 20.1 ms\nH200 SXM: 4800 GB/s (data sheet)'
    assert sanitize(text) == 'đo được <số> TB/s, <thời gian>\nH200 SXM: 4800 GB/s (data sheet)'


def test_every_reference_figure_is_compared_as_it_is():
    from d2lhelpers import reference
    from d2lhelpers.reference import format_value, load_run

    run = load_run('h200-2026-11-30')
    for name, entry in run['notebooks'].items():
        keys = [*entry.get('results', {}), *('probe.' + k for k in entry.get('probe', {}))]
        ref = reference(name, *keys, run=run['id'])
        figures = [f'- {k}: {format_value(v, k.split("."))}' for k, v in ref.values.items()]
        block = '\n'.join([ref.header, *figures])  # a GPU answer: the header, then its lines
        assert block.count('(tham khảo)') == 1  # one mark, in the header
        lines = block.splitlines()
        masked = sanitize(f'đo được 1.0 ms\n{block}')
        assert masked == 'đo được <thời gian>\n\n\n' + '\n'.join(lines[1:] + lines[:1])


def test_a_reference_block_ends_at_a_blank_line():
    ref = load_h200_answer()
    text = f'đo được 12.0 ms\n{ref}\n\nsau đó 3.0 ms, 1.5x'
    masked = sanitize(text)
    kept = '\n'.join(ref.splitlines()[1:] + ref.splitlines()[:1])  # the header moved below
    assert masked == f'đo được <thời gian>\n\n\n{kept}\n\nsau đó <thời gian>, <số>x'
    assert sanitize(text.replace('61.5 µs', '61.6 µs')) != masked  # a stored figure changed


def load_h200_answer() -> str:
    return (
        'Đáp án trên GPU (tham khảo), lần chạy h200-2026-11-30: NVIDIA H200 × 1\n'
        '- mỗi phép nhân eager tốn 61.5 µs; CPU nhanh hơn tới n = 128 (1.81x)\n'
        '- n = 8192: 34.4 TFLOP/s = 51% đỉnh FP32, gấp 24.8x CPU; 519.85x mức sàn: chi phí cố '
        'định 0%, tính toán 100% thời gian; trội: tính toán'
    )


def test_a_measured_line_is_not_protected_by_a_reference_line_below_it():
    text = 'đo được 12.0 ms\n  median_s.device_once: 421.150 ms (tham khảo)'
    assert sanitize(text).splitlines()[0] == 'đo được <thời gian>'


def test_compare_runs_table_masks_this_run_and_the_ratios_and_keeps_stored_figures():
    from d2lhelpers.reference import compare_runs, load_run

    name = 'exercises/01-cpu-vs-gpu-matmul'
    mine = load_run('cpu2-2026-12-03')['notebooks'][name]['results']
    rows = {'TF /CPU:0, n = 2048': 'gflops.TF /CPU:0.2048', 'mức sàn': 'floor_s.TF /CPU:0'}
    runs = ['cpu2-2026-12-03', 'h200-2026-11-30']
    table = compare_runs(name, rows, this=mine, runs=runs)
    faster = dict(mine, gflops={'TF /CPU:0': {'2048': 12345.6}}, floor_s={'TF /CPU:0': 1.5e-6})
    other = compare_runs(name, rows, this=faster, runs=runs)
    assert table != other and sanitize(table) == sanitize(other)  # columns do not move
    masked = sanitize(table)
    assert 'TF /CPU:0, n = 2048 <số> GFLOP/s 304 GFLOP/s (<số>x) 1386 GFLOP/s (<số>x)' in masked
    assert 'mức sàn <thời gian> 25.8 µs (<số>x) —' in masked
    assert sanitize(table.replace('1386 GFLOP/s', '1387 GFLOP/s')) != masked


@pytest.mark.parametrize('word', ['nhanh hơn', 'chậm hơn', 'ngang nhau'])
def test_masks_the_verdict_of_compare_and_keeps_the_rest(word):
    from d2lhelpers import compare

    a, b = BenchmarkResult((1.0,)), BenchmarkResult((2.0,))
    c = str(compare(a, b, names=('(a) chép mỗi bước', '(b) chép một lần')))
    line = c.replace('nhanh hơn', word)
    assert sanitize(line) == (
        '(a) chép mỗi bước so với (b) chép một lần: <kết luận> '
        '(tỉ số thời gian <số>x, khoảng <số>x–<số>x theo IQR)'
    )
    assert sanitize(line) != sanitize(line.replace('(b) chép một lần', '(b) chép hai lần'))
    assert sanitize(line.replace(word, 'nhanh gấp')) != sanitize(line)  # not a verdict word


@pytest.mark.parametrize(
    ('times_floor', 'work'), [(2.23, 'compute'), (1.55, 'memory'), (9.0, None)]
)
def test_masks_a_breakdown_s_verdicts_and_keeps_its_shape(times_floor, work):
    b = Breakdown(times_floor, 1.0, work)
    line = f'n = 128: {b}'
    assert sanitize(line) == (
        'n = 128: <số>x mức sàn: chi phí cố định <số>%, <công việc> <số>% thời gian; '
        'trội: <phần trội>'
    )
    other = Breakdown(1.01, 1.0, 'memory')
    assert sanitize(line) == sanitize(f'n = 128: {other}')  # another machine: same line
    assert sanitize(line) != sanitize(f'n = 256: {b}')  # the rest is compared
    assert sanitize(f'{line} (tham khảo)') == f'\n\n{line} (tham khảo)'


CASES = [
    'trường hợp mức sàn',
    'mỗi byte nhanh hơn: trường hợp bộ nhớ đệm',
    'mỗi byte ngang nhau, mức sàn không trội: không thấy bộ nhớ đệm',
    'mỗi byte chậm hơn, cả khi bỏ phần mức sàn: không trường hợp nào',
]


@pytest.mark.parametrize('case', CASES)
def test_masks_choose_a_gpu_s_exercise_3_case_and_keeps_the_rest(case):
    line = f'Bài 3 (/CPU:0): mức sàn chiếm 25% thời gian của phép cộng 4 MiB; {case}'
    masked = 'Bài 3 (/CPU:0): mức sàn chiếm <số>% thời gian của phép cộng 4 MiB; <trường hợp>'
    assert sanitize(line) == masked
    assert sanitize(line.replace('/CPU:0', '/GPU:0')) != masked  # the device is compared
    assert sanitize(f'{line} lạ') == f'{masked.replace("<trường hợp>", case)} lạ'  # not a case


def test_masks_the_sizes_found_at_the_floor():
    assert sanitize('mức sàn ở n = [16, 32, 64]; n = 2048') == 'mức sàn ở n = <các n>; n = 2048'
    assert sanitize('gặp ở n = không có') == 'gặp ở n = <các n>'
    assert sanitize('trần 227.4 GFLOP/s ở n = 1024') == 'trần <số> GFLOP/s ở n = 1024'


def test_a_negative_duration_is_a_duration():
    assert sanitize('lượt xuôi -35.9 µs, mức sàn 75.0 µs') == sanitize(
        'lượt xuôi 1.2 ms, mức sàn 3 µs'
    )
    assert sanitize('-35.9 µs') == '<thời gian>' and sanitize('-35.9') == '-35.9'


def test_a_reference_line_keeps_its_verdicts():
    line = '  kind.host_vs_device: ngang nhau; trội: tính toán, ở n = [16] (tham khảo)'
    assert sanitize(line) == f'\n\n{line}'


ENV_LINE = 'TensorFlow 2.21.0, Keras 3.15.1, NumPy 2.4.6'  # env_report()'s first line, as stored


def test_env_report_versions_are_masked_and_nothing_else_in_the_line():
    # requirements.txt pins an older Keras and NumPy on Python 3.10 than the stored run had
    masked = 'TensorFlow <phiên bản>, Keras <phiên bản>, NumPy <phiên bản>'
    older = 'TensorFlow 2.21.0, Keras 3.12.4, NumPy 2.2.6'
    assert sanitize(ENV_LINE) == sanitize(older) == masked
    report = f'{ENV_LINE}\nbản build có CUDA: không\nthiết bị vật lý: /CPU:0'
    assert sanitize(report) == report.replace(ENV_LINE, masked)
    for changed in [
        ENV_LINE.replace('Keras', 'JAX'),  # another package
        ENV_LINE.replace(', NumPy', '; NumPy'),
        ENV_LINE + ' (GPU)',  # more in the line
        'TensorFlow 2.21.0, NumPy 2.4.6, Keras 3.15.1',  # another order
    ]:
        assert sanitize(changed) != masked, changed


def test_a_version_outside_the_env_report_line_is_kept():
    reference_header = (
        'Số đo tham khảo (dữ liệu lưu sẵn, không phải lần chạy này): NVIDIA H200 × 1, '
        'ngày 2026-11-30, TensorFlow 2.21.0, notebook phiên bản 0.2.0 (commit fa73af3)'
    )
    for text in [reference_header, f'  {ENV_LINE}', f'{ENV_LINE} (tham khảo)']:
        assert sanitize(text).lstrip('\n') == text
