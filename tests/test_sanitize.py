"""tests/sanitize.cfg, read by nbval's own parser: it masks measured figures and nothing else."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from nbval.plugin import get_sanitize_patterns

CFG = Path(__file__).resolve().parent / 'sanitize.cfg'
TEXT = CFG.read_text(encoding='utf-8')
PATTERNS = get_sanitize_patterns(TEXT)


def sanitize(s: str) -> str:
    """What nbval does to every compared string (IPyNbCell.sanitize)."""
    for regex, replace in dict(PATTERNS).items():
        s = re.sub(regex, replace, s)
    return s


def test_nbval_reads_all_three_pairs():
    assert len(PATTERNS) == 3


def test_no_pair_is_silently_dropped():
    # nbval drops a pair whose `replace:` is empty or not on the line after `regex:`.
    assert len(PATTERNS) == len(re.findall(r'^regex:', TEXT, flags=re.MULTILINE))


def test_every_pattern_compiles_and_replaces_with_text():
    for regex, replace in PATTERNS:
        re.compile(regex)
        assert replace.strip(), regex


@pytest.mark.parametrize(
    'figure',
    [
        '12.345 ms',
        '3.2 µs',
        '1.234 s',
        '850 ns',
        '2.5e-05 s',
        '182.4 GFLOP/s',
        '1.3 TFLOP/s',
        '12.1 GB/s',
        '1.87x',
        '12x',
    ],
)
def test_masks_a_measured_figure(figure):
    masked = sanitize(f'trung vị {figure}, tiếp')
    assert not re.search(r'\d', masked), masked
    assert masked.startswith('trung vị <') and masked.endswith('>, tiếp')


def test_masks_a_benchmark_line():
    line = 'matmul: 12.345 ms ± 0.210 ms (trung vị ± nửa IQR, 5 lần đo), 162.0 GFLOP/s'
    assert sanitize(line) == (
        'matmul: <thời gian> ± <thời gian> (trung vị ± nửa IQR, 5 lần đo), <tốc độ>'
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
        'loss 0.123456',
        'float32',
        'TensorFlow 2.21.0, Keras 3.15.1',
        '3 số',
        'epoch 3/5',
        'tf.Tensor([1. 2.], shape=(2,), dtype=float32)',
        '/job:localhost/replica:0/task:0/device:CPU:1',
    ],
)
def test_keeps_what_must_be_compared(text):
    assert sanitize(text) == text
