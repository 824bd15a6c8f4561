"""d2lhelpers.datasheets: each GPU name TensorFlow reports finds its own row, and no other."""

from __future__ import annotations

import pytest

from d2lhelpers import DATASHEETS, find_spec


@pytest.mark.parametrize(
    'device_name, row',
    [
        ('Tesla T4', 'T4'),
        ('NVIDIA L4', 'L4'),
        ('Tesla V100-PCIE-16GB', 'V100 PCIe 16GB'),
        ('Tesla V100-PCIE-32GB', 'V100 PCIe 32GB'),
        ('Tesla V100-SXM2-16GB', 'V100 SXM2 16GB'),
        ('Tesla V100-SXM2-32GB', 'V100 SXM2 32GB'),
        ('NVIDIA A100-PCIE-40GB', 'A100 PCIe 40GB'),
        ('NVIDIA A100-SXM4-40GB', 'A100 SXM 40GB'),
        ('NVIDIA A100 80GB PCIe', 'A100 PCIe 80GB'),
        ('NVIDIA A100-SXM4-80GB', 'A100 SXM 80GB'),
        ('NVIDIA H100 PCIe', 'H100 PCIe'),
        ('NVIDIA H100 NVL', 'H100 NVL'),
        ('NVIDIA H100 80GB HBM3', 'H100 SXM'),
        ('NVIDIA H200', 'H200 SXM'),
        ('NVIDIA H200 NVL', 'H200 NVL'),
        ('NVIDIA GeForce RTX 3090', 'RTX 3090'),
        ('NVIDIA GeForce RTX 4090', 'RTX 4090'),
        # no row: no false match
        ('NVIDIA GH200 480GB', None),  # a Grace Hopper superchip
        ('NVIDIA A100-SXM4-40GB MIG 1g.5gb', None),  # a MIG slice: 1/7 of the SMs
        ('NVIDIA H100 80GB HBM3 MIG 3g.40gb', None),
        ('Tesla V100S-PCIE-32GB', None),  # V100S: other clocks and memory
        ('Tesla V100-SXM3-32GB', None),
        ('NVIDIA GeForce RTX 3090 Ti', None),
        ('NVIDIA GeForce RTX 4090 D', None),
        ('NVIDIA GeForce RTX 4090 Laptop GPU', None),  # another chip (AD103)
        ('NVIDIA B200', None),
        ('', None),
        (None, None),
    ],
)
def test_a_gpu_name_finds_its_own_row(device_name, row):
    spec = find_spec(device_name)
    assert (spec and spec.name) == row


def test_rows_are_unique_and_printed_as_data_sheet_figures():
    assert len({s.name for s in DATASHEETS}) == len(DATASHEETS)
    for s in DATASHEETS:
        assert str(s).endswith('(data sheet)') and s.source.startswith('https://')
        assert s.ridge() == pytest.approx(1e3 * s.fp32_tflops / s.bandwidth_gbs)


def test_form_factors_differ_where_their_data_sheets_do():
    pcie, sxm = find_spec('NVIDIA H100 PCIe'), find_spec('NVIDIA H100 80GB HBM3')
    assert pcie.bandwidth_gbs < sxm.bandwidth_gbs and pcie.fp32_tflops < sxm.fp32_tflops
    v100 = {name: find_spec(f'Tesla V100-{name}') for name in ('PCIE-16GB', 'SXM2-32GB')}
    assert v100['PCIE-16GB'].fp32_tflops == 14 and v100['SXM2-32GB'].fp32_tflops == 15.7


@pytest.mark.parametrize('memory', [16, 32])
def test_a_v100_row_has_the_memory_of_its_name(memory):
    for form in ('PCIE', 'SXM2'):
        assert find_spec(f'Tesla V100-{form}-{memory}GB').memory_gb == memory


def test_geforce_dense_tf32_is_its_fp32_rate_and_tensor_figures_are_dense():
    for name in ('RTX 3090', 'RTX 4090'):
        s = find_spec(f'NVIDIA GeForce {name}')
        assert s.tf32_tflops == s.fp32_tflops and s.memory_gb == 24
    # data-centre rows with TF32: at least 2x FP32 (L4 60/30.3 to A100 156/19.5)
    tf32 = [s for s in DATASHEETS if 'RTX' not in s.name and s.tf32_tflops]
    assert tf32 and all(s.tf32_tflops > 1.9 * s.fp32_tflops for s in tf32)
