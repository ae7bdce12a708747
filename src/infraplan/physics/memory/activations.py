"""Activation memory: the tensors a decoder layer saves for its backward pass.

This generalises Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large
Transformer Models", section "Activation Memory") from GPT to any architecture here by
listing the saved tensors one by one. For GPT (LayerNorm, MHA, 4h GeLU MLP, dropout,
eager attention) the terms add up to the paper's s b h (34 + 5 a s / h) bytes per layer
in 16-bit.

Each term is in bytes per token of a micro-batch and belongs to one class:
  replicated  every tensor-parallel rank holds it whole (hidden-size tensors around the
              norms); sequence parallelism shards it by t (the paper's sequence parallelism)
  tensor      sharded by t (per-head and FFN-width tensors)
  per_key     also multiplied by the keys each query attends to (eager attention's
              s x s probabilities), sharded by t
Roles: "core" terms belong to the attention core that selective recompute repeats (the
paper's "selective activation recomputation") and "checkpoint_input" terms exist only
then, as the recomputed core's inputs; "gemm_input" terms are saved only for the weight
gradient of `gemm`, so a frozen weight (LoRA base) does not keep them.

Kernel profiles: "fused" is Megatron-Core / Transformer Engine style (flash attention
saving q, k, v, output and the fp32 log-sum-exp; fused norms saving input and fp32
statistics; fused SwiGLU saving the gate|up GEMM output). "eager" is plain PyTorch ops
(explicit Q K^T, softmax and P V; K/V repeated to every head for GQA; SwiGLU as
silu(g) * u), the accounting of the 2022 paper: its softmax output is 16-bit. Hugging Face
transformers' eager attention softmaxes in fp32 (`softmax(..., dtype=torch.float32)
.to(q.dtype)`) and keeps both copies, 6 bytes a score where this keeps 2 (measured with
saved_tensors_hooks on a 3-layer Llama, 2026-11-26: 6.08); it is not modelled.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from infraplan.models.arch import MlpSpec, ModelArch

KERNELS = ("fused", "eager")
FP32_BYTES = 4  # norm statistics, log-sum-exp, router probabilities, loss logits
INDEX_BYTES = 8  # int64 token ids and targets
MASK_BYTES = 1  # torch dropout masks are bool
# Eager cross-entropy runs on fp32 logits (`F.cross_entropy(logits.float(), y)`, Megatron's
# unfused vocab-parallel cross entropy): it saves a 4 V bytes/token softmax and, while it
# runs, holds the 16-bit logits and the fp32 gradient besides. A fused cross-entropy kernel
# (Megatron-Core's cross_entropy_loss_fusion, Transformer Engine's, Liger's) keeps only the
# 16-bit logits and overwrites them with their gradient in place.
EAGER_LOSS_LOGIT_BYTES = FP32_BYTES

Scaling = Literal["replicated", "tensor", "per_key"]


@dataclass(frozen=True, slots=True)
class Term:
    name: str
    bytes_per_token: float
    scaling: Scaling
    role: Literal["layer", "core", "checkpoint_input", "gemm_input"] = "layer"
    gemm: str = ""


@dataclass(frozen=True, slots=True)
class Widths:
    """Bytes per element: activations (a), GEMM inputs kept for weight gradients (g)."""

    act: float
    gemm_in: float


def _norm(prefix: str, arch: ModelArch, width: int, w: Widths) -> list[Term]:
    stats = 2 if arch.norm == "layernorm" else 1  # mean and rstd, or rstd
    return [Term(f"{prefix}_input", w.act * width, "replicated"),
            Term(f"{prefix}_stats", FP32_BYTES * stats, "replicated")]


def _attention(arch: ModelArch, kernels: str, w: Widths) -> list[Term]:
    at, h = arch.attention, arch.hidden_size
    terms = _norm("attn_norm", arch, h, w)
    if at.kind == "mla":
        terms.append(Term("q_kv_down_input", w.gemm_in * h, "replicated", "gemm_input", "q"))
        if at.q_lora_rank:
            r = at.q_lora_rank
            terms += [Term("q_norm_input", w.act * r + FP32_BYTES, "replicated"),
                      Term("q_up_input", w.gemm_in * r, "replicated", "gemm_input", "q")]
        r = at.kv_lora_rank
        terms += [Term("kv_norm_input", w.act * r + FP32_BYTES, "replicated"),
                  Term("kv_up_input", w.gemm_in * r, "replicated", "gemm_input", "k")]
        kv_heads = at.num_heads  # MLA hands the kernel per-head keys and values
    else:
        terms.append(Term("qkv_input", w.gemm_in * h, "replicated", "gemm_input", "qkv"))
        kv_heads = at.num_kv_heads
    kv_width = at.head_dim + at.v_head_dim
    terms.append(Term("q", w.act * at.num_heads * at.head_dim, "tensor"))
    if kernels == "eager" and kv_heads < at.num_heads:
        # Eager GQA repeats K and V to every head inside the attention core: the core's
        # matmuls save the repeated copies; selective recompute keeps the unrepeated ones.
        terms += [Term("k_v_repeated", w.act * at.num_heads * kv_width, "tensor", "core"),
                  Term("k_v", w.act * kv_heads * kv_width, "tensor", "checkpoint_input")]
    else:
        terms.append(Term("k_v", w.act * kv_heads * kv_width, "tensor"))
    if kernels == "fused":
        # flash attention keeps its output (also the out-projection's input) and the
        # per-head log-sum-exp (Dao 2023, FlashAttention-2, Alg. 1-2)
        terms += [Term("attn_lse", FP32_BYTES * at.num_heads, "tensor", "core"),
                  Term("attn_output", w.act * at.out_width, "tensor")]
    else:
        terms.append(Term("attn_probs", w.act * at.num_heads, "per_key", "core"))
        if arch.attention_dropout > 0:
            terms += [Term("attn_dropout_mask", MASK_BYTES * at.num_heads, "per_key", "core"),
                      Term("attn_dropout_out", w.act * at.num_heads, "per_key", "core")]
        terms.append(Term("attn_out_proj_input", w.gemm_in * at.out_width, "tensor",
                          "gemm_input", "o"))
    if arch.hidden_dropout > 0:
        terms.append(Term("attn_residual_dropout_mask", MASK_BYTES * h, "replicated"))
    return terms


def _mlp_core(prefix: str, mlp: MlpSpec, kernels: str, w: Widths, rows: float,
              down_gemm: str = "down") -> list[Term]:
    """Tensors of FFN width f: what the activation saves, and the down-projection input."""
    f = mlp.intermediate_size
    if mlp.gated:
        saved = 2 if kernels == "fused" else 3  # gate|up; or gate, silu(gate), up
    else:
        saved = 1  # the activation's input (GeLU, squared ReLU)
    return [Term(f"{prefix}_activation", rows * w.act * saved * f, "tensor"),
            Term(f"{prefix}_down_input", rows * w.gemm_in * f, "tensor", "gemm_input",
                 down_gemm)]


def _mlp(arch: ModelArch, kernels: str, w: Widths, moe_layer: bool) -> list[Term]:
    h = arch.hidden_size
    terms = _norm("mlp_norm", arch, h, w)
    terms.append(Term("mlp_input", w.gemm_in * h, "replicated", "gemm_input", "up"))
    if not moe_layer:
        terms += _mlp_core("mlp", arch.mlp, kernels, w, 1.0)
    else:
        moe = arch.moe
        k = float(moe.experts_per_token)
        # Router probabilities (fp32) per token; the routing metadata (top-k indices and
        # weights, the permutation's row indices and gathered weights, the weights' norm);
        # each token is copied to k experts (dispatch) and their k outputs are kept to
        # weight the combine (Megatron-Core's permute / unpermute).
        metadata = k * (2 * INDEX_BYTES + 2 * FP32_BYTES) + FP32_BYTES
        terms += [Term("router_probs", FP32_BYTES * moe.num_experts, "replicated"),
                  Term("routing_metadata", metadata, "replicated"),
                  Term("expert_inputs", k * w.gemm_in * h, "replicated", "gemm_input",
                       "expert"),
                  Term("expert_outputs", k * w.act * h, "replicated")]
        terms += _mlp_core("expert", moe.expert, kernels, w, k, down_gemm="expert")
        if moe.shared:
            terms += _mlp_core("shared_expert", moe.shared, kernels, w, 1.0)
    if arch.hidden_dropout > 0:
        terms.append(Term("mlp_residual_dropout_mask", MASK_BYTES * h, "replicated"))
    return terms


def layer_terms(arch: ModelArch, *, kernels: str = "fused", moe_layer: bool = False,
                widths: Widths = Widths(2, 2)) -> list[Term]:
    """Saved tensors of one decoder layer, per token, at tensor parallelism 1."""
    return _attention(arch, kernels, widths) + _mlp(arch, kernels, widths, moe_layer)


def freed_before_core(arch: ModelArch, *, kernels: str = "fused", moe_layer: bool = False,
                      widths: Widths = Widths(2, 2)) -> list[Term]:
    """What a layer's backward frees before it reaches the attention core: in a pre-norm
    layer (x + attn(norm(x)), then + mlp(norm(x))) the MLP half's backward runs first, then
    the out-projection's and the attention residual's. (The fused profile's attention
    output is also flash attention's saved output, held until the core's backward.)"""
    after = [t for t in _attention(arch, kernels, widths)
             if t.gemm == "o" or t.name == "attn_residual_dropout_mask"]
    return after + _mlp(arch, kernels, widths, moe_layer)


def embedding_terms(arch: ModelArch, widths: Widths) -> list[Term]:
    """First pipeline stage: the token ids the embedding's backward indexes with."""
    terms = [Term("input_ids", INDEX_BYTES, "replicated")]
    if arch.hidden_dropout > 0:
        terms.append(Term("embedding_dropout_mask", MASK_BYTES * arch.hidden_size,
                          "replicated"))
    return terms


def output_terms(arch: ModelArch, widths: Widths, kernels: str = "fused") -> list[Term]:
    """Last pipeline stage: final norm, LM-head input, the logits the loss keeps, targets
    (Korthikanti et al. 2022: 4 s b h (1 + V / h) / t for 16-bit h tensors, eager loss)."""
    h = arch.hidden_size
    logit_bytes = widths.act if kernels == "fused" else EAGER_LOSS_LOGIT_BYTES
    return _norm("final_norm", arch, h, widths) + [
        Term("lm_head_input", widths.gemm_in * h, "replicated", "gemm_input", "lm_head"),
        Term("loss_logits", logit_bytes * arch.vocab_size, "tensor"),
        Term("targets", INDEX_BYTES, "replicated"),
    ]


def loss_transient_bytes_per_token(arch: ModelArch, widths: Widths, kernels: str) -> float:
    """Beyond what the loss saves, while it runs (per token, before TP): the eager loss
    holds the 16-bit logits and the fp32 gradient of the logits; a fused one nothing."""
    return 0.0 if kernels == "fused" else (widths.act + FP32_BYTES) * arch.vocab_size


def layer_input_bytes(arch: ModelArch, widths: Widths) -> float:
    """Full recompute keeps only each layer's input (the paper's 2 s b h per layer)."""
    return widths.act * arch.hidden_size
