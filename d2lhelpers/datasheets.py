"""Published figures of common NVIDIA GPUs, from their data sheets: never measurements.

Tensor-core figures are dense (half NVIDIA's "with sparsity" figure) and, for FP16/BF16, with FP32
accumulation (what TensorFlow's matmul uses; GeForce cards run it at half their FP16-accumulate
rate); ``None``: no such mode. A row prints ending with ``(data sheet)``, which tests/sanitize.cfg
compares verbatim. ``find_spec`` gives no row to a GPU that no row describes (see ``_PATTERNS``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class GPUSpec:
    """One GPU's data-sheet figures (TFLOP/s are dense; GB are 10^9 bytes)."""

    name: str
    memory_gb: float
    bandwidth_gbs: float
    fp32_tflops: float
    tf32_tflops: float | None
    fp16_tflops: float | None
    bf16_tflops: float | None
    source: str

    def ridge(self, tflops: float | None = None) -> float:
        """FLOP per byte where the roofline bends: peak compute / peak bandwidth."""
        return 1e3 * (tflops if tflops is not None else self.fp32_tflops) / self.bandwidth_gbs

    def __str__(self) -> str:
        def opt(x: float | None) -> str:
            return '-' if x is None else f'{x:g}'

        return (
            f'{self.name}: {self.memory_gb:g} GB, {self.bandwidth_gbs:g} GB/s, '
            f'FP32 {self.fp32_tflops:g} TFLOP/s, TF32 {opt(self.tf32_tflops)}, '
            f'FP16 {opt(self.fp16_tflops)}, BF16 {opt(self.bf16_tflops)} TFLOP/s (data sheet)'
        )


_T4 = 'https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/tesla-t4/t4-tensor-core-datasheet-951643.pdf'
_L4 = 'https://resources.nvidia.com/en-us-data-center-overview/l4-gpu-datasheet'
_V100 = 'https://images.nvidia.com/content/technologies/volta/pdf/volta-v100-datasheet-update-us-1165301-r5.pdf'
_A100 = 'https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf'
_H100 = 'https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet'
_H200 = 'https://www.nvidia.com/en-us/data-center/h200/'
_GA102 = (
    'https://www.nvidia.com/content/PDF/nvidia-ampere-ga-102-gpu-architecture-whitepaper-v2.pdf'
)
_ADA = 'https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf'

#: The GPUs a learner is likely to meet: Colab's T4, L4 and A100 (40 GB), data-centre GPUs, and
#: the two GeForce cards most used for deep learning (dense TF32 = FP32 there: no TF32 gain).
DATASHEETS: tuple[GPUSpec, ...] = (
    GPUSpec('T4', 16, 320, 8.1, None, 65, None, _T4),
    GPUSpec('L4', 24, 300, 30.3, 60, 121, 121, _L4),
    GPUSpec('V100 PCIe 16GB', 16, 900, 14, None, 112, None, _V100),
    GPUSpec('V100 PCIe 32GB', 32, 900, 14, None, 112, None, _V100),
    GPUSpec('V100 SXM2 16GB', 16, 900, 15.7, None, 125, None, _V100),
    GPUSpec('V100 SXM2 32GB', 32, 900, 15.7, None, 125, None, _V100),
    GPUSpec('A100 PCIe 40GB', 40, 1555, 19.5, 156, 312, 312, _A100),
    GPUSpec('A100 SXM 40GB', 40, 1555, 19.5, 156, 312, 312, _A100),
    GPUSpec('A100 PCIe 80GB', 80, 1935, 19.5, 156, 312, 312, _A100),
    GPUSpec('A100 SXM 80GB', 80, 2039, 19.5, 156, 312, 312, _A100),
    GPUSpec('H100 PCIe', 80, 2000, 51, 378, 756, 756, _H100),
    GPUSpec('H100 NVL', 94, 3900, 60, 417.5, 835.5, 835.5, _H100),
    GPUSpec('H100 SXM', 80, 3350, 67, 494.5, 989.5, 989.5, _H100),
    GPUSpec('H200 NVL', 141, 4800, 60, 417.5, 835.5, 835.5, _H200),
    GPUSpec('H200 SXM', 141, 4800, 67, 494.5, 989.5, 989.5, _H200),
    GPUSpec('RTX 3090', 24, 936, 35.6, 35.6, 71, 71, _GA102),
    GPUSpec('RTX 4090', 24, 1008, 82.6, 82.6, 165.2, 165.2, _ADA),
)

# TensorFlow's device_name ('NVIDIA A100-PCIE-40GB', 'NVIDIA H100 80GB HBM3') -> a row; the first
# match wins. No row: a MIG slice ('NVIDIA A100-SXM4-40GB MIG 1g.5gb': a fraction of the chip's
# SMs and bandwidth), GH200 (Grace Hopper), V100S and the V100 variants other than PCIe/SXM2 16/32
# GB (other clocks), GeForce Ti/D/laptop variants. An A100/H100/H200 name without form factor gets
# the SXM row.
_PATTERNS = (
    (r'\bMIG\b', None),
    (r'GH\d00', None),
    (r'\bT4\b', 'T4'),
    (r'\bL4\b', 'L4'),
    (r'V100S', None),
    (r'V100.*PCIE?\W*16\s*GB', 'V100 PCIe 16GB'),
    (r'V100.*PCIE?\W*32\s*GB', 'V100 PCIe 32GB'),
    (r'V100.*SXM2\W*16\s*GB', 'V100 SXM2 16GB'),
    (r'V100.*SXM2\W*32\s*GB', 'V100 SXM2 32GB'),
    (r'V100', None),
    (r'RTX 3090(?!\s*Ti)(?!.*Laptop)', 'RTX 3090'),
    (r'RTX 4090(?!\s*D\b)(?!.*Laptop)', 'RTX 4090'),
    (r'A100.*PCI.*40\s*GB|A100.*40\s*GB.*PCI', 'A100 PCIe 40GB'),
    (r'A100.*PCI|A100.*80\s*GB.*PCI', 'A100 PCIe 80GB'),
    (r'A100.*80\s*GB', 'A100 SXM 80GB'),
    (r'A100', 'A100 SXM 40GB'),
    (r'H100.*PCI', 'H100 PCIe'),
    (r'H100.*NVL', 'H100 NVL'),
    (r'H100', 'H100 SXM'),
    (r'H200.*NVL', 'H200 NVL'),
    (r'H200', 'H200 SXM'),
)


def find_spec(device_name: str | None) -> GPUSpec | None:
    """The data-sheet row of a GPU named like ``'NVIDIA H200'`` or ``'Tesla T4'``, else None."""
    if not device_name:
        return None
    for pattern, name in _PATTERNS:
        if re.search(pattern, device_name, flags=re.IGNORECASE):
            return None if name is None else next(s for s in DATASHEETS if s.name == name)
    return None
