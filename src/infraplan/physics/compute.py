"""Time of the kernels a training step runs on one accelerator, vectorised over plans.

GEMMs: a roofline (Williams et al. 2009) whose compute roof is the achievable fraction of
the dense peak, lowered for shapes that fill the chip poorly. A GEMM's output is cut into
tiles, one per SM at a time; the last "wave" of tiles leaves SMs idle, and a tile hanging
over the matrix edge computes padding (the "wave quantization" and "tile quantization"
effects of NVIDIA's Matrix Multiplication Background guide). cuBLAS picks among a few tile
shapes; we take the best. Each tile also pays a fixed prologue and epilogue beside its
main loop over K, so efficiency grows as K / (K + K0). The memory roof is reading A and B
and writing C once. The two roofs combine as a p-norm (`roofline_s`): p = infinity is the
sharp roofline (loads and math overlap perfectly), p = 1 their sum (no overlap).

Attention: FlashAttention-style kernels at a measured fraction of peak; eager attention as
two batched GEMMs plus a memory-bound softmax over the s x s scores.
Element-wise work (norms, activations, residuals, optimizer) runs at a measured fraction of
the memory bandwidth.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# (tile rows, tile cols, relative efficiency): CUTLASS/cuBLAS tensor-core tile shapes; a
# smaller tile re-reads its operands more often per FLOP and runs slower.
GEMM_TILES = ((256, 128, 1.0), (128, 256, 1.0), (128, 128, 0.92), (64, 128, 0.80))


@dataclass(frozen=True, slots=True)
class Device:
    """What the kernel model needs of one accelerator, efficiencies applied."""

    gemm_flops: float  # achievable dense FLOP/s of a large GEMM in the training dtype
    attention_flops: float  # achievable FLOP/s of the fused attention kernel (forward)
    memory_bytes_per_s: float  # achievable HBM bandwidth
    compute_units: int | None  # SMs / CUs; None: no wave quantization
    kernel_overhead_s: float  # fixed cost per kernel (launch, ramp-up, tail)
    gemm_k_overhead: float = 0.0  # K0: a tile's prologue/epilogue in K elements
    roofline_exponent: float = math.inf  # p of roofline_s (infinity: the sharp roofline)
    # FMA rate of the vector (CUDA) cores / the tensor-core peak of the GEMM dtype: what a
    # GEMV kernel computes at instead of padding one row to a tensor-core tile (0: none)
    vector_share: float = 0.0
    # the fused attention kernel's backward pass, where it runs at its own rate (0: the
    # forward's): FlashAttention and cuDNN backward kernels reach less of peak than forward
    attention_backward_flops: float = 0.0
    # achievable FLOP/s of a large 16-bit GEMM, for the layers fp8 training leaves in 16
    # bits (the LM head); 0: gemm_flops (the training dtype is 16-bit already)
    gemm16_flops: float = 0.0


def roofline_s(compute_s, memory_s, exponent: float = math.inf):
    """A kernel's seconds from its compute-bound and memory-bound times: the p-norm
    (compute^p + memory^p)^(1/p). The sharp roofline (p = infinity, Williams et al. 2009)
    assumes loads and math overlap perfectly, which a kernel reaches only far from the
    ridge point; at the ridge a p-norm costs 2^(1/p) x either time, and p = 1 is no
    overlap at all."""
    compute_s = np.asarray(compute_s, dtype=float)
    memory_s = np.asarray(memory_s, dtype=float)
    if math.isinf(exponent):
        return np.maximum(compute_s, memory_s)
    if exponent == 1:  # exactly the sum (the scaled form below can round one ulp above it)
        return compute_s + memory_s
    # scaled by the larger time so that the powers neither overflow nor underflow
    top = np.maximum(compute_s, memory_s)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(top > 0, np.minimum(compute_s, memory_s) / top, 0.0)
    return top * (1.0 + ratio ** exponent) ** (1.0 / exponent)


def wave_efficiency(m, n, compute_units: int | None, groups=1.0):
    """Fraction of the chip a GEMM with an m x n output keeps busy, best tile shape. A
    grouped GEMM (`groups` problems of that shape in one kernel: the experts of an MoE
    layer in Megatron-Core's GroupedMLP, CUTLASS grouped GEMM, vLLM's fused_moe) schedules
    the tiles of all groups together, so its waves are counted over all of them."""
    m, n = np.broadcast_arrays(np.asarray(m, dtype=float), np.asarray(n, dtype=float))
    if compute_units is None:
        return np.ones(m.shape)
    best = np.zeros(m.shape)
    for tm, tn, tile_eff in GEMM_TILES:
        tiles_m, tiles_n = np.ceil(m / tm), np.ceil(n / tn)
        tiles = tiles_m * tiles_n * groups
        waves = np.ceil(tiles / compute_units)
        padding = (m * n) / (tiles_m * tm * tiles_n * tn)
        best = np.maximum(best, tile_eff * padding * tiles / (waves * compute_units))
    return best


def gemm_kernels_s(device: Device, flops, efficiency, k, bytes_moved, count=1.0):
    """Seconds for `count` GEMM kernels of `flops` each over a K depth of `k`, moving
    `bytes_moved` each, that keep `efficiency` of the chip busy (wave or split-K tiling):
    the roofline of their math (with each tile's K0 prologue/epilogue) and their bytes,
    plus one launch each. Training (`gemm_time`) and the serving step share it."""
    compute = flops / (device.gemm_flops * efficiency * (k / (k + device.gemm_k_overhead)))
    memory = bytes_moved / device.memory_bytes_per_s
    return count * (roofline_s(compute, memory, device.roofline_exponent)
                    + device.kernel_overhead_s)


def gemm_time(device: Device, m, n, k, *, bytes_per_element: float, count=1.0, groups=1.0):
    """Seconds for `count` kernels, each a grouped GEMM of `groups` problems (m x k) @
    (k x n) (1: a plain GEMM): the slower of compute and memory, plus one launch."""
    m, n, k = (np.asarray(x, dtype=float) for x in (m, n, k))
    return gemm_kernels_s(device, 2.0 * m * n * k * groups,
                          wave_efficiency(m, n, device.compute_units, groups), k,
                          (m * k + k * n + m * n) * groups * bytes_per_element, count)


def attention_time(device: Device, flops, count=1.0, *, backward: bool = False):
    """Seconds of fused attention doing `flops` matmul FLOPs of its forward pass, or of its
    backward pass (`backward`)."""
    rate = device.attention_backward_flops if backward else 0.0
    return flops / (rate or device.attention_flops) + count * device.kernel_overhead_s


def memory_time(device: Device, bytes_moved, count=1.0):
    """Seconds of memory-bound element-wise work moving `bytes_moved` bytes."""
    return np.asarray(bytes_moved, dtype=float) / device.memory_bytes_per_s + \
        count * device.kernel_overhead_s
