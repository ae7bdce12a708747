"""Memory of one serving replica per GPU: weights, the activation peak, fixed overheads, and
what is left for the paged KV cache.

Weights: every GEMM weight in its stored format (serving/quantization.py), split over the
t tensor-parallel ranks; embeddings (vocabulary-parallel), norms and biases stay 16-bit.
Activations: engines profile one forward pass of `max_num_batched_tokens` tokens before
sizing the cache (vLLM's profile run; TensorRT-LLM's activation buffers for max_num_tokens).
Its peak is the widest live set of a layer: the input, the gate+up output of the MLP
(2 f / t per token) and the QKV output, plus the fp32 logits of the sampled sequences.
Fixed: the process's CUDA context and kernel libraries (the engine's own figure where the
catalog has one, else the PyTorch context), plus communication buffers under TP or PP.
The KV cache then gets either a fraction of the whole device (vLLM gpu_memory_utilization)
or a fraction of what is still free (TensorRT-LLM kv_cache_free_gpu_mem_fraction).
A speculative draft model sits on the same GPUs: its 16-bit weights (split like the
target's) join the weights, and every cached token holds its KV too, in the target's KV
format (vLLM gives the drafter's attention layers blocks of the same KV cache).
"""

from __future__ import annotations

from dataclasses import dataclass

from infraplan.catalog import load_catalog
from infraplan.catalog.engines import Engine
from infraplan.catalog.schema import Accelerator
from infraplan.errors import InputError
from infraplan.models import ModelArch, gemms, kv_cache_bytes_per_token, param_counts
from infraplan.serving.quantization import WeightFormat, smaller_weight_formats, stays_16_bit
from infraplan.units import format_bytes


@dataclass(frozen=True)
class ReplicaMemory:
    """Bytes per GPU."""

    device_bytes: float
    weight_bytes: float
    activation_bytes: float
    overhead_bytes: float
    kv_bytes: float
    kv_bytes_per_token: float  # per GPU
    block_size: int

    @property
    def kv_blocks(self) -> int:
        return int(self.kv_bytes // (self.kv_bytes_per_token * self.block_size))

    @property
    def kv_tokens(self) -> int:
        return self.kv_blocks * self.block_size


def weight_bytes_per_gpu(arch: ModelArch, weights: WeightFormat, tp: int) -> float:
    """GEMM weights of the layers in the stored format; embeddings, the LM head, norms,
    biases and what the checkpoint leaves unquantized (stays_16_bit) in 16 bits (engines
    leave the head unquantized: vLLM's fp8 and TensorRT-LLM's quantization configs exclude
    lm_head by default)."""
    experts = arch.moe.num_experts if arch.is_moe else 1
    quantized = sum(g.fan_in * g.fan_out * g.layers * (experts if g.routed_expert else 1)
                    for g in gemms(arch)
                    if g.scope != "head" and not stays_16_bit(g.scope, arch, weights))
    rest = param_counts(arch).total - quantized
    return (quantized * weights.bytes_per_weight + rest * 2.0) / tp


def kv_bytes_per_token_per_gpu(arch: ModelArch, kv_dtype: str, tp: int) -> float:
    """A cached token's bytes on one TP rank. KV heads are split over the ranks; with fewer
    KV heads than ranks each rank keeps one (vLLM and TensorRT-LLM replicate them); an MLA
    latent is whole on every rank."""
    return kv_cache_bytes_per_token(arch, kv_dtype) * _kv_share(arch, tp)


def _kv_share(arch: ModelArch, tp: int) -> float:
    at = arch.attention
    if at.kind == "mla":
        return 1.0
    return max(at.num_kv_heads / tp, 1.0) / at.num_kv_heads


def replica_memory(arch: ModelArch, gpu: Accelerator, engine: Engine, *, tp: int, pp: int,
                   weights: WeightFormat, kv_dtype: str, max_num_batched_tokens: int,
                   max_num_seqs: int, block_size: int,
                   memory_fraction: float | None = None,
                   draft: ModelArch | None = None) -> ReplicaMemory:
    at, h = arch.attention, arch.hidden_size
    ffn = arch.moe.expert.intermediate_size * arch.moe.experts_per_token if arch.is_moe \
        else arch.mlp.intermediate_size
    live_per_token = 2 * h + 2 * ffn / tp + (at.q_width + 2 * at.num_kv_heads * at.head_dim) / tp
    logits = max_num_seqs * arch.vocab_size / tp * 4.0 * 2  # fp32 logits and probabilities
    activations = max_num_batched_tokens * live_per_token * 2.0 + logits
    overheads = load_catalog().memory_overheads
    fixed = engine.context_bytes or overheads.get("cuda-context").value
    if tp * pp > 1:
        fixed += overheads.get("communication-buffers").value
    # pipeline stages hold 1/pp of the layers each (and of their KV cache)
    weight = weight_bytes_per_gpu(arch, weights, tp) / pp
    draft_weight = 0.0 if draft is None else weight_bytes_per_gpu(
        draft, WeightFormat("bf16", 2.0, "bf16"), tp)  # the draft's steps run in 16 bits
    weight += draft_weight
    total = gpu.memory_bytes
    fraction = memory_fraction or engine.kv_memory_fraction
    if engine.kv_memory_rule == "of_total":
        kv = fraction * total - weight - activations - fixed
    else:
        kv = fraction * (total - weight - activations - fixed)
    per_token = kv_bytes_per_token_per_gpu(arch, kv_dtype, tp) / pp
    if draft is not None:
        per_token += kv_bytes_per_token_per_gpu(draft, kv_dtype, tp)
    mem = ReplicaMemory(device_bytes=total, weight_bytes=weight, activation_bytes=activations,
                        overhead_bytes=fixed, kv_bytes=max(kv, 0.0),
                        kv_bytes_per_token=per_token, block_size=block_size)
    if mem.kv_blocks < 1:
        smaller = smaller_weight_formats(weights, engine.weight_formats_missing(gpu))
        quantize = f", quantize the weights ({', '.join(smaller)})" if smaller else ""
        fix = f"raise tp (now {tp}) or pp (now {pp}){quantize} or pick a GPU with more memory"
        if kv > 0:  # memory is left, but less than one block of block_size tokens
            fix = f"lower block_size (now {block_size:,}), or {fix}"
        if memory_fraction is not None:
            fix = f"raise memory_fraction (now {memory_fraction:g}), or {fix}"
        if activations > weight:  # the batch limits, not the model, fill the GPU
            fix = (f"lower the batch limits (max_num_seqs or a static batch_size: now "
                   f"{max_num_seqs:,}; max_num_batched_tokens: now {max_num_batched_tokens:,}), "
                   f"or {fix}")
        if draft_weight:
            fix = f"pick a smaller draft model, or method: ngram, or {fix}"
        raise InputError(
            f"{arch.name} on {tp * pp} x {gpu.name} (tp={tp}, pp={pp}): weights "
            f"{format_bytes(weight)}"
            + (f" (the draft {draft.name}'s {format_bytes(draft_weight)} included)"
               if draft_weight else "")
            + f" + activations {format_bytes(activations)} per GPU leave no room for the KV "
            "cache", fix=fix)
    return mem
