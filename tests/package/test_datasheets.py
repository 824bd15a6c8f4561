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
        ('NVIDIA GH200 480GB', None),  # a Grace Hopper superchip has no row: no false match
        ('NVIDIA GeForce RTX 4090', None),
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
