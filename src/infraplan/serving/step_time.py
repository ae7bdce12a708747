"""Seconds of one inference-engine iteration: a mix of prefill tokens and decode sequences.

One step runs every layer once over the T tokens scheduled in it (the prefill chunks plus
one token per decoding sequence). Per GPU of a tensor-parallel group of t:

- Weight GEMMs, each a roofline (Williams et al. 2009) of the FLOPs at the achievable
  GEMM rate (wave/tile quantization and the K-efficiency of physics/compute.py) and the
  bytes moved (the weight matrix once, in its stored format, plus activations). A decode
  step of a few sequences is therefore bound by reading the weights; a prefill chunk by
  the math. Between the two, near the ridge point (a decode step of hundreds of
  sequences, a short prompt), loads and math overlap imperfectly: the two times combine
  as a p-norm whose exponent is fitted (`serving-roofline-exponent`). Megatron-style
  splits (Shoeybi et al. 2019): column-parallel GEMMs cut fan_out by t, row-parallel
  ones fan_in.
- MoE (Shazeer et al. 2017; Mixtral, Jiang et al. 2024): T tokens routed top-k among E
  experts touch E (1 - (1 - k/E)^T) distinct experts in expectation (uniform routing);
  each touched expert's weights are read once and it multiplies T k / touched rows. A hot
  expert (`expert_imbalance` = busiest / mean load) stretches the grouped GEMM.
- Attention: prefill at the fused-attention FLOP rate, 2 (d_qk + d_v) FLOPs per head per
  (query, key) pair (causal pairs counted once); decode reads each cached token's K and V
  once per step (FlashDecoding / PagedAttention), so it is bound by HBM bandwidth. Engine
  releases whose kernel does not group a GQA model's query heads (catalog engines,
  `grouped_decode`) re-read each shared KV head from L2 once per query head.
- Tensor parallelism: two all-reduces of T x h activations per layer (after the attention
  output and the MLP down projections), over the node's links (physics/collectives.py);
  one where attention and MLP run in parallel and their outputs are summed first.
- Element-wise work (norms, residual adds, rotary, SwiGLU) at memory bandwidth; int8
  SmoothQuant adds two quantize kernels a layer (quantization.py), engine releases that
  quantize every GEMM input on its own four (catalog engines, `unfused_quantization`).
- The LM head runs only for the sequences sampled in the step (the last token of each),
  then the engine's CPU time the GPU waits for (scheduling, sampling, launch) from the
  engine row: fixed per step, plus, in releases that loop over the batch in Python, a
  cost per sequence sampled.
- Engines whose host loop runs beside the GPU (TensorRT-LLM's PyTorch backend and its
  overlap scheduler) hide their host time until it outgrows the GPU's: a step then lasts
  the host's time per sequence (engine row, by host CPU) times its sequences.

Speculative decoding (Leviathan et al. 2023): a step verifies gamma drafted tokens per
sequence (gamma + 1 query tokens) and keeps on average tau = (1 - a^(gamma+1)) / (1 - a)
of them (their eq. 1, acceptance rate a). The drafts cost gamma decode steps of the draft
model (n-gram / prompt-lookup drafting costs no GPU time). The simulator counts one token
per sequence per step, so a decode step's time is divided by tau (an expected-value model).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from infraplan.catalog.schema import Accelerator, System
from infraplan.dtypes import dtype_bytes
from infraplan.models import ModelArch, gemms
from infraplan.physics import hardware
from infraplan.physics.collectives import all_gather, all_reduce, group, send_recv
from infraplan.physics.compute import GEMM_TILES, Device, gemm_kernels_s, memory_time
from infraplan.reprs import compact_repr
from infraplan.serving.memory import kv_bytes_per_token_per_gpu
from infraplan.serving.quantization import WeightFormat, stays_16_bit


@dataclass(frozen=True)
class Speculation:
    """Speculative decoding: `num_tokens` drafted per step, accepted each with probability
    `acceptance_rate`; `draft` is the draft model's step model (None: n-gram drafting)."""

    num_tokens: int
    acceptance_rate: float
    draft: StepModel | None = None

    @property
    def tokens_per_step(self) -> float:
        a, g = self.acceptance_rate, self.num_tokens
        return float(g + 1) if a >= 1 else (1 - a ** (g + 1)) / (1 - a)


@dataclass(frozen=True)
class StepModel:
    """Closed forms of one replica's step time, as tables the simulator indexes.

    time = max(linear_s[T] + head_s[S] + prefill_s_per_pair x pairs
               + decode_s_per_token x ctx + overhead_s + overhead_s_per_sequence x S,
               host_s_per_sequence x S)
    T: tokens in the step, S: sequences sampled, pairs: prefill (query, key) pairs,
    ctx: cached tokens the decoding sequences attend to. The last term is host work that
    overlaps the GPU's (floor_s).
    """

    linear_s: list[float]
    head_s: list[float]
    prefill_s_per_pair: float
    decode_s_per_token: float
    overhead_s: float
    speculation: Speculation | None = None
    overhead_s_per_sequence: float = 0.0
    host_s_per_sequence: float = 0.0

    __repr__ = compact_repr

    @property
    def max_tokens(self) -> int:
        return len(self.linear_s) - 1

    def floor_s(self, sequences: int) -> float:
        """The host time a decode step of `sequences` cannot beat, the GPU's being hidden
        under it; per generated token, as decode_coefficients, under speculation."""
        floor = self.host_s_per_sequence * sequences
        return floor / self.speculation.tokens_per_step if self.speculation else floor

    def time(self, prefill_tokens: int, n_decode: int, samples: int, prefill_pairs: float,
             decode_ctx: float) -> float:
        gpu = self._gpu_time(prefill_tokens, n_decode, samples, prefill_pairs, decode_ctx)
        # a step with prefill is one whole iteration, speculative or not
        floor = self.floor_s(samples) if prefill_tokens == 0 \
            else self.host_s_per_sequence * samples
        return max(gpu, floor)

    def linear(self, tokens: int) -> float:
        """linear_s[tokens]; past the table (a step larger than max_num_batched_tokens: a
        preempted prompt recomputed alone without chunked prefill), its last slope carries
        on, the GEMMs being compute-bound there."""
        table = self.linear_s
        top = len(table) - 1
        if tokens <= top:
            return table[tokens]
        return table[top] + (tokens - top) * (table[top] - table[top - 1])

    def _gpu_time(self, prefill_tokens: int, n_decode: int, samples: int,
                  prefill_pairs: float, decode_ctx: float) -> float:
        spec = self.speculation
        if spec is None or n_decode == 0:
            try:  # the table's entry; past it, linear() (an index is the hot path here)
                linear = self.linear_s[prefill_tokens + n_decode]
            except IndexError:
                linear = self.linear(prefill_tokens + n_decode)
            return (linear + self.head_s[samples]
                    + self.prefill_s_per_pair * prefill_pairs
                    + self.decode_s_per_token * decode_ctx + self.overhead_s
                    + self.overhead_s_per_sequence * samples)
        a, b = self.decode_coefficients(n_decode)
        if prefill_tokens == 0:
            return a + b * decode_ctx
        # a mixed step: the prefill part beside a speculative decode step (not divided by tau)
        return (a + b * decode_ctx) * spec.tokens_per_step + self.linear(prefill_tokens) \
            + self.prefill_s_per_pair * prefill_pairs

    def decode_coefficients(self, n: int) -> tuple[float, float]:
        """A decode-only step of n sequences costs a + b x ctx (per generated token), or
        floor_s(n) where that is longer (the caller's to apply)."""
        spec = self.speculation
        if spec is None:
            return (self.linear_s[n] + self.head_s[n] + self.overhead_s
                    + self.overhead_s_per_sequence * n, self.decode_s_per_token)
        g, tau = spec.num_tokens, spec.tokens_per_step
        queries = min(n * (g + 1), self.max_tokens)
        a = self.linear_s[queries] + self.head_s[min(queries, len(self.head_s) - 1)] \
            + self.overhead_s + self.overhead_s_per_sequence * n
        b = self.decode_s_per_token
        if spec.draft is not None:
            da, db = spec.draft.decode_coefficients(n)
            a, b = a + g * da, b + g * db
        return a / tau, b / tau


def steps_at_floor(a: float, b: float, floor: float, c: float, n: int) -> float:
    """How many decode steps of n sequences, the first reading c cached tokens and each the
    next n more, last the host's `floor` rather than their GPU time a + b x ctx: those with
    a + b (c + n j) < floor, j = 0, 1, ... (0 when the first is GPU-bound, inf when the
    GPU time does not grow)."""
    if floor <= a + b * c:
        return 0
    return math.inf if b <= 0 else math.ceil((floor - a - b * c) / (b * n))


def _roofline(dev: Device, m, n: float, k: float, weight_bytes: float, act_bytes: float,
              count, groups=1.0) -> np.ndarray:
    """`count` kernels, each a grouped GEMM of `groups` problems (m x k) @ (k x n) with
    stored weights (1: a plain GEMM; the touched experts of an MoE layer: one fused-MoE
    kernel, as vLLM's fused_moe and TensorRT-LLM's MoE plugin run them), tiled for few
    rows (split_k_efficiency): physics.compute.gemm_kernels_s; rows m = 0 cost nothing."""
    m = np.asarray(m, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):  # m = 0 rows: masked below
        seconds = gemm_kernels_s(dev, 2.0 * m * n * k * groups,
                                 split_k_efficiency(m, n, k, dev, groups), k,
                                 (n * k * weight_bytes + m * (k + n) * act_bytes) * groups,
                                 count)
    return np.where(m > 0, seconds, 0.0)


def routed_expert_s(dev: Device, tokens, n: float, k: float, experts: int, top_k: float,
                    weight_bytes: float, layers: float = 1.0,
                    imbalance: float = 1.0) -> np.ndarray:
    """Seconds of one routed-expert GEMM (k -> n per expert) in `layers` MoE layers for
    `tokens` tokens sent to `top_k` of `experts` experts each: the touched experts as one
    grouped kernel (the module docstring's MoE term)."""
    tokens = np.asarray(tokens, dtype=float)
    touched = experts * (1.0 - (1.0 - top_k / experts) ** tokens)
    rows = np.divide(tokens * top_k * imbalance, touched, out=np.zeros_like(tokens),
                     where=touched > 0)
    return _roofline(dev, rows, n, k, weight_bytes, dtype_bytes("bf16"), layers,
                     groups=touched)


SPLIT_K_MIN_DEPTH = 512  # K elements each slice of a stream-K GEMM keeps
# Tensor-core tiles for few-row GEMMs (MMA is 16 rows deep on Ampere and Hopper): decode
# kernels pick them; their lower relative efficiency reflects operand re-reads per FLOP.
SMALL_TILES = ((16, 128, 0.5), (32, 128, 0.6))


def split_k_efficiency(m, n, k: float, dev: Device, groups=1.0):
    """Share of the chip's GEMM rate a few-row GEMM gets.

    A decode GEMM has a handful of rows, so its output tiles alone leave most SMs idle;
    stream-K / split-K kernels (CUTLASS, cuBLAS heuristics) cut the K loop into slices of
    at least SPLIT_K_MIN_DEPTH so that tiles x slices spread over every SM. Rows below
    the tile height still compute padding (tile quantization). A GEMV kernel (one or a few
    rows: cuBLAS gemv, TensorRT-LLM's weight-only batched GEMV, AWQ/TurboMind decode
    kernels) skips the tensor cores and their padding and runs at the vector cores' rate,
    spread over every SM."""
    m = np.asarray(m, dtype=float)
    units = dev.compute_units
    best = np.full(m.shape, dev.vector_share)
    for tm, tn, tile_eff in GEMM_TILES + SMALL_TILES:
        tiles = np.ceil(m / tm) * math.ceil(n / tn) * groups
        work = tiles * max(1, k // SPLIT_K_MIN_DEPTH)
        spread = np.minimum(work / units, 1.0) if units else 1.0
        padding = (m * n) / (np.ceil(m / tm) * tm * math.ceil(n / tn) * tn)
        best = np.maximum(best, tile_eff * padding * spread)
    return best


def _split(fan_in: int, fan_out: int, split: str, tp: int) -> tuple[float, float]:
    if split == "column":
        return fan_in, fan_out / tp
    if split == "row":
        return fan_in / tp, fan_out
    return fan_in, fan_out


# Element-wise bytes per token per layer, in units of h activations: two RMSNorms (read and
# write h each: 4), two residual adds (read 2h, write h each: 6). Rotary (q and k, read and
# write) and SwiGLU (read 2f, write f) are added per TP rank below.
_ELEMENTWISE_H = 10


def _kv_read_cost(reads: int, hbm_bytes_per_s: float, l2_bytes_per_s: float | None) -> float:
    """HBM-equivalent reads of the KV cache per decode step. A kernel without GQA grouping
    (TensorRT-LLM's masked MHA: one thread block per query head) reads a shared KV head once
    per query head; the blocks of one group run side by side, so the first read comes from
    HBM and the other reads - 1 from L2, at L2 bandwidth. Without an L2 figure every read is
    charged at HBM bandwidth (an upper bound)."""
    if reads == 1:
        return 1.0
    if l2_bytes_per_s is None:
        return float(reads)
    return 1.0 + (reads - 1) * hbm_bytes_per_s / l2_bytes_per_s


def moe_routing_bytes_per_token(arch: ModelArch) -> float:
    """Bytes one token moves per MoE layer to reach its experts and come back: its h
    activations are read and written as top-k rows in expert order before the grouped
    GEMMs, and the k output rows are read back and summed into h after them (TensorRT-LLM's
    expandInputRows and finalizeMoeRouting kernels; vLLM's fused_moe gathers inside the GEMM
    but sums the k rows the same way): (2 + 2k) h in 16 bits."""
    return dtype_bytes("bf16") * (2 + 2 * arch.moe.experts_per_token) * arch.hidden_size


def build_step_model(arch: ModelArch, gpu: Accelerator, *, tp: int, pp: int = 1,
                     weights: WeightFormat,
                     kv_dtype: str, max_tokens: int, max_seqs: int, overhead_s: float,
                     overhead_s_per_sequence: float = 0.0, host_s_per_sequence: float = 0.0,
                     expert_imbalance: float = 1.0,
                     speculation: Speculation | None = None,
                     decode_kv_reads: int = 1, system: System | None = None) -> StepModel:
    """`system`: the node type whose links carry the TP collectives (None: the
    accelerator's default node)."""
    act = dtype_bytes("bf16")
    dev = hardware.device(gpu.name, weights.gemm_dtype, use="serving")
    dev16 = hardware.device(gpu.name, gpu.sixteen_bit, use="serving")
    fab = hardware.fabric(hardware.cluster(gpu.name, system))
    tokens = np.arange(max_tokens + 1, dtype=float)
    at, h = arch.attention, arch.hidden_size

    linear = np.zeros_like(tokens)
    head = None
    for g in gemms(arch):
        k, n = _split(g.fan_in, g.fan_out, g.split, tp)
        if g.scope == "head":
            rows = np.arange(max_seqs + 1, dtype=float)
            head = _roofline(dev16, rows, n, k, act, act, 1.0)  # the head stays 16-bit
            # vocabulary-parallel logits (fp32) gathered on the rank that samples
            head = head + all_gather(rows * g.fan_out * 4.0, group(tp, 1, fab), fab)
        elif g.routed_expert:
            linear += routed_expert_s(dev, tokens, n, k, arch.moe.num_experts,
                                      g.tokens_per_token, weights.bytes_per_weight,
                                      g.layers, expert_imbalance)
        elif stays_16_bit(g.scope, arch, weights):
            linear += _roofline(dev16, tokens * g.tokens_per_token, n, k, act, act, g.layers)
        else:
            linear += _roofline(dev, tokens * g.tokens_per_token, n, k,
                                weights.bytes_per_weight, act, g.layers)

    layers = arch.num_layers
    ffn = arch.moe.expert.intermediate_size * arch.moe.experts_per_token if arch.is_moe \
        else arch.mlp.intermediate_size
    per_token_bytes = act * (_ELEMENTWISE_H * h + 2 * (at.q_width + at.num_kv_heads
                                                        * at.head_dim) / tp + 3 * ffn / tp)
    linear += tokens * layers * per_token_bytes / dev.memory_bytes_per_s
    if weights.quantized_inputs:
        # GEMM inputs quantized in kernels of their own, read 16-bit and written in 8 bits,
        # one launch each per layer (SmoothQuant's two, quantization.py; all four in engine
        # releases that fuse none, catalog Engine.unfused_quantization). Widths per rank:
        # the QKV and gate/up inputs are h on every rank, the other two are split by TP.
        width = {"qkv": h, "attention_output": at.q_width / tp, "gate_up": h,
                 "mlp_activation": ffn / tp}
        widths = sum(width[name] for name in weights.quantized_inputs)
        linear += np.where(tokens > 0, memory_time(
            dev, tokens * layers * (act + 1) * widths,
            count=weights.quantize_kernels_per_layer * layers), 0.0)
    if arch.is_moe:
        linear += tokens * arch.num_moe_layers * moe_routing_bytes_per_token(arch) \
            / dev.memory_bytes_per_s
    # parallel attention + MLP: one all-reduce of their summed outputs (vLLM's Falcon)
    reductions = 1 if arch.parallel_residual else 2
    linear += reductions * layers * all_reduce(tokens * h * act, group(tp, 1, fab), fab) \
        * (tokens > 0)

    heads_per_gpu = at.num_heads / tp
    pair_flops = 2.0 * layers * heads_per_gpu * (at.head_dim + at.v_head_dim)
    kv_bytes = kv_bytes_per_token_per_gpu(arch, kv_dtype, tp) \
        * _kv_read_cost(decode_kv_reads, dev.memory_bytes_per_s, gpu.l2_bandwidth_bytes_per_s)
    decode = max(kv_bytes / dev.memory_bytes_per_s, pair_flops / dev16.attention_flops)
    if pp > 1:
        # Pipeline-parallel serving: a batch passes the pp stages in turn, each running 1/pp
        # of the layers, so its step is the whole model's time plus pp - 1 sends of its
        # activations to the next stage. The stages overlap across batches: the engine keeps
        # pp batches in flight (vLLM's virtual engines; simulate.py runs pp engines).
        same_node = tp * pp <= fab.gpus_per_node
        linear = linear + (pp - 1) * send_recv(tokens * h * act, same_node, fab) * (tokens > 0)
    return StepModel(linear_s=linear.tolist(), head_s=head.tolist(),
                     prefill_s_per_pair=pair_flops / dev16.attention_flops,
                     decode_s_per_token=decode, overhead_s=overhead_s,
                     speculation=speculation, overhead_s_per_sequence=overhead_s_per_sequence,
                     host_s_per_sequence=host_s_per_sequence)
