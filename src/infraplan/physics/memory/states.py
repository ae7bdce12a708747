"""Model states per parameter (weights, gradients, optimizer) and how a model's parameters
fall on pipeline stages, tensor- and expert-parallel ranks.

Accounting follows the ZeRO paper (Rajbhandari et al. 2020, Sec. 3.1): mixed-precision
Adam keeps 2 bytes of fp16/bf16 weights, 2 bytes of gradients and K = 12 bytes of optimizer
state (fp32 master weights, momentum and variance) per parameter: 16 bytes in all.
Megatron-LM accumulates gradients in fp32 "main grads" (`grad_dtype="fp32"`: 4 bytes).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from infraplan.dtypes import dtype_bytes
from infraplan.errors import InputError, UnknownNameError
from infraplan.models.arch import ModelArch
from infraplan.models.params import param_counts


@dataclass(frozen=True, slots=True)
class Optimizer:
    name: str
    moment_bytes_per_param: float  # m, v (or momentum) and their scales
    keeps_master_weights: bool  # an fp32 copy when the model trains in 16 or 8 bits
    citation: str

    def state_bytes_per_param(self, precision: str) -> float:
        """K of the ZeRO paper: 12 for mixed-precision Adam, 8 for plain fp32 Adam (the
        weights are their own master copy)."""
        master = 4.0 if self.keeps_master_weights and precision != "fp32" else 0.0
        return master + self.moment_bytes_per_param


# 8-bit Adam: m and v in int8 with one fp32 absmax per block of 2048 values (Dettmers et al.
# 2022, "8-bit Optimizers via Block-wise Quantization", Sec. 2).
_BLOCKWISE_SCALE_BYTES = 2 * 4 / 2048
OPTIMIZERS: dict[str, Optimizer] = {o.name: o for o in (
    Optimizer("adamw", 8.0, True, "ZeRO Sec. 3.1: fp32 master weights + fp32 m + v (K = 12)"),
    Optimizer("adamw-bf16", 4.0, False, "pure bf16 training: m and v in bf16, no master copy"),
    Optimizer("adamw-8bit", 2.0 + _BLOCKWISE_SCALE_BYTES, True,
              "bitsandbytes 8-bit Adam: int8 m, v with block-wise fp32 scales, fp32 master"),
    Optimizer("sgd-momentum", 4.0, True, "fp32 momentum (+ fp32 master weights)"),
)}


def optimizer(name: str) -> Optimizer:
    if name not in OPTIMIZERS:
        raise UnknownNameError("optimizer", name, OPTIMIZERS)
    return OPTIMIZERS[name]


# Transformer Engine keeps an fp8 copy of each GEMM weight (and its transpose on Hopper)
# between forward and backward when training in fp8 (TE docs, "FP8 primer": weights are cast
# once per step and cached). Counted as 2 bytes per GEMM parameter on top of the bf16 copy.
FP8_WEIGHT_CACHE_BYTES_PER_PARAM = 2.0

# QLoRA (Dettmers et al. 2023, Sec. 3): NF4 weights (4 bits) with double quantization, i.e.
# 8-bit block scales per 64 weights and one fp32 scale per 256 of those: 4 + 8/64 +
# 32/(64*256) bits per parameter.
NF4_BYTES_PER_PARAM = (4 + 8 / 64 + 32 / (64 * 256)) / 8


def weight_bytes_per_param(precision: str) -> float:
    """The working copy the GEMMs read: 16-bit for mixed precision (fp8 adds its cache)."""
    return 4.0 if precision == "fp32" else 2.0


@dataclass(frozen=True)
class StageParams:
    """Parameters of each pipeline stage, split by how tensor/expert parallelism shard
    them. Arrays have one entry per stage."""

    tensor_sharded: np.ndarray  # attention, dense and shared MLPs, embedding, LM head
    replicated: np.ndarray  # norms, routers, learned positions: whole on every TP rank
    experts: np.ndarray  # routed experts: sharded by TP (ETP = TP) and by EP
    gemm: np.ndarray  # parameters of GEMM weights (what fp8 and NF4 apply to)
    vocab: np.ndarray  # embedding and LM-head parameters (part of tensor_sharded and gemm)
    layers: np.ndarray  # decoder layers on the stage
    moe_layers: np.ndarray
    max_layer_dense: float  # largest layer's non-expert parameters (ZeRO-3 buffers)
    max_layer_experts: float
    max_layer_dense_gemm: float  # of max_layer_dense, the GEMM weights (what NF4 packs)


def stage_layer_indices(num_layers: int, pp: int, vp: int) -> list[list[int]]:
    """Layers held by each pipeline rank. Without interleaving, contiguous blocks, the
    first `num_layers % pp` ranks taking one more; with `vp` virtual stages (interleaved
    1F1B, Narayanan et al. 2021 Sec. 2.2), chunk c of rank r holds block c * pp + r."""
    chunks = pp * vp
    sizes = [num_layers // chunks + (1 if i < num_layers % chunks else 0)
             for i in range(chunks)]
    starts = np.concatenate([[0], np.cumsum(sizes)])
    ranks: list[list[int]] = [[] for _ in range(pp)]
    for chunk in range(chunks):
        ranks[chunk % pp].extend(range(int(starts[chunk]), int(starts[chunk + 1])))
    return ranks


@lru_cache(maxsize=512)
def stage_params(arch: ModelArch, pp: int, vp: int = 1) -> StageParams:
    counts = param_counts(arch)
    layers = counts.layers
    ranks = stage_layer_indices(arch.num_layers, pp, vp)

    def per_stage(fn) -> np.ndarray:
        return np.array([sum(fn(layers[i]) for i in idx) for idx in ranks], dtype=float)

    tensor = per_stage(lambda p: p.attention + p.mlp + p.shared_experts)
    replicated = per_stage(lambda p: p.norms + p.router)
    experts = per_stage(lambda p: p.routed_experts)
    gemm = tensor + experts
    # Embedding (with its position table and norm) on the first stage; LM head (a copy of
    # the tied embedding when the two ends sit on different stages, as Megatron-LM does)
    # and final norm on the last.
    vocab = np.zeros(pp)
    vocab[0] += counts.embedding
    replicated[0] += counts.position_embedding + counts.embedding_norm
    tied_copy = counts.embedding if (arch.tie_word_embeddings and pp > 1) else 0
    vocab[-1] += counts.lm_head + tied_copy
    tensor += vocab
    gemm += vocab
    replicated[-1] += counts.final_norm
    moe = np.array([sum(arch.layer_is_moe(i) for i in idx) for idx in ranks], dtype=float)
    largest = max(layers, key=lambda p: p.dense)
    return StageParams(
        tensor_sharded=tensor, replicated=replicated, experts=experts, gemm=gemm, vocab=vocab,
        layers=np.array([len(idx) for idx in ranks], dtype=float), moe_layers=moe,
        max_layer_dense=float(largest.dense),
        max_layer_experts=float(max(p.routed_experts for p in layers)),
        max_layer_dense_gemm=float(largest.attention + largest.mlp + largest.shared_experts))


def expert_dp(tp, dp, cp, etp, ep):
    """Ranks holding the same routed experts: Megatron-Core's expert grid etp x ep x this
    covers a pipeline stage's tp x dp x cp ranks (etp = tp: EP carved out of DP x CP). Their
    gradients sync together, and ZeRO shards their states over them."""
    return np.maximum(tp * dp * cp / (etp * ep), 1.0)


LORA_TARGET_GROUPS = {
    "attention": ("q", "k", "v", "o"),
    "mlp": ("gate", "up", "down"),
    "all-linear": ("q", "k", "v", "o", "gate", "up", "down"),
}
# Module names people pass (Hugging Face / PEFT) and what they adapt.
LORA_MODULE_ALIASES = {
    "q_proj": "q", "k_proj": "k", "v_proj": "v", "o_proj": "o", "gate_proj": "gate",
    "up_proj": "up", "down_proj": "down", "c_attn": "qkv", "c_fc": "up", "w1": "gate",
    "w3": "up", "w2": "down", "dense_h_to_4h": "up", "dense_4h_to_h": "down",
}


def valid_lora_targets() -> str:
    """The targets a LoRA may name, for an error's text."""
    return (f"{', '.join(LORA_TARGET_GROUPS)}, or module names "
            f"({', '.join(LORA_MODULE_ALIASES)})")


def lora_targets(names: tuple[str, ...]) -> frozenset[str]:
    """Canonical LoRA targets (q, k, v, o, gate, up, down) from groups or module names."""
    out: set[str] = set()
    for name in names:
        key = name.strip().lower()
        if not key:
            raise InputError("lora_targets has an empty target; valid targets: "
                             f"{valid_lora_targets()}",
                             fix="set lora_targets: [all-linear] (every linear layer), or "
                                 "name the targets")
        if key in LORA_TARGET_GROUPS:
            out.update(LORA_TARGET_GROUPS[key])
        elif key in LORA_MODULE_ALIASES:
            target = LORA_MODULE_ALIASES[key]
            out.update(("q", "k", "v") if target == "qkv" else (target,))
        elif key in LORA_TARGET_GROUPS["all-linear"]:
            out.add(key)
        else:
            raise UnknownNameError("LoRA target", name, list(LORA_TARGET_GROUPS)
                                   + list(LORA_MODULE_ALIASES)
                                   + list(LORA_TARGET_GROUPS["all-linear"]),
                                   fix="use a group (all-linear, attention, mlp) or module "
                                       "names such as q_proj, v_proj")
    return frozenset(out)


def lora_shapes(arch: ModelArch, targets: frozenset[str],
                moe_layer: bool) -> list[tuple[int, int]]:
    """(fan_in, fan_out) of every GEMM LoRA adapts in one layer. Routed experts are not
    adapted (PEFT's "all-linear" does not reach fused expert weights); shared experts are."""
    at, h = arch.attention, arch.hidden_size
    shapes: dict[str, list[tuple[int, int]]] = {
        "q": [(h, at.q_width)], "o": [(at.out_width, h)],
        "k": [(h, at.num_kv_heads * at.head_dim)], "v": [(h, at.num_kv_heads * at.v_head_dim)],
    }
    if at.kind == "mla":
        q = [(h, at.q_width)] if at.q_lora_rank is None else \
            [(h, at.q_lora_rank), (at.q_lora_rank, at.q_width)]
        kv_up = at.num_heads * (at.head_dim - at.qk_rope_head_dim + at.v_head_dim)
        shapes.update(q=q, k=[(h, at.kv_lora_rank + at.qk_rope_head_dim)],
                      v=[(at.kv_lora_rank, kv_up)])
    mlps = [arch.moe.shared] if moe_layer and arch.moe and arch.moe.shared else \
        ([] if moe_layer else [arch.mlp])
    for mlp in mlps:
        f = mlp.intermediate_size
        shapes.setdefault("up", []).append((h, f))
        shapes.setdefault("down", []).append((f, h))
        if mlp.gated:
            shapes.setdefault("gate", []).append((h, f))
    return [shape for t in sorted(targets) for shape in shapes.get(t, [])]


def lora_params_per_layer(arch: ModelArch, targets: frozenset[str], rank: int,
                          moe_layer: bool) -> int:
    """LoRA adds A (r x fan_in) and B (fan_out x r) to each adapted GEMM (Hu et al. 2021,
    Sec. 4): r (fan_in + fan_out) parameters."""
    return sum(rank * (fan_in + fan_out)
               for fan_in, fan_out in lora_shapes(arch, targets, moe_layer))


def state_bytes(precision: str, grad_dtype: str | None, optimizer_name: str) -> tuple[float,
                                                                                       float,
                                                                                       float]:
    """(weight, gradient, optimizer) bytes per trainable parameter."""
    grad = dtype_bytes(grad_dtype or ("fp32" if precision == "fp32" else "bf16"),
                       field="grad_dtype")
    return (weight_bytes_per_param(precision), grad,
            optimizer(optimizer_name).state_bytes_per_param(precision))
