"""Forward and training FLOPs of a decoder, from its GEMMs and its attention.

A GEMM of an (m x k) by (k x n) matrix costs 2mkn FLOPs (one multiply and one add per
term), so a linear layer costs 2 * fan_in * fan_out per token (Kaplan et al. 2020, Sec.
2.1). Attention adds, per query token and per key it attends to, 2 * a * d_qk for the
scores Q K^T and 2 * a * d_v for the weighted sum P V. Norms, activations, softmax and
biases are memory-bound and not counted, as in the published conventions (Narayanan et al.
2021 eq. 3; PaLM App. B) and in `torch.utils.flop_counter`.

Backward costs twice the forward (a gradient for the input and one for the weight per GEMM;
dQ, dK from dS and dV, dP from dO for attention), hence the 6N rule: training = 3 x forward.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from infraplan.models.arch import MlpSpec, ModelArch


@dataclass(frozen=True, slots=True)
class Gemm:
    """A weight GEMM of the model: `tokens_per_token` rows per token of input, in every
    one of `layers` layers (MoE experts: experts_per_token rows per token).

    scope: where it runs (attention of every layer, the dense FFN, the MoE block, the head).
    split: how Megatron-style tensor parallelism cuts it: "column" (fan_out / t), "row"
    (fan_in / t) or "replicated" (every rank computes it whole)."""

    name: str
    fan_in: int
    fan_out: int
    layers: int
    tokens_per_token: float = 1.0
    scope: str = "attention"
    split: str = "column"

    @property
    def routed_expert(self) -> bool:
        """One of the MoE block's routed experts (rows: the tokens routed to it)."""
        return self.name.startswith("expert_")

    @property
    def flops_per_token(self) -> float:
        return 2.0 * self.fan_in * self.fan_out * self.layers * self.tokens_per_token


def _mlp_gemms(prefix: str, mlp: MlpSpec, hidden: int, layers: int, rows: float,
               scope: str) -> list[Gemm]:
    f = mlp.intermediate_size
    up = [Gemm(f"{prefix}_gate", hidden, f, layers, rows, scope)] if mlp.gated else []
    return up + [Gemm(f"{prefix}_up", hidden, f, layers, rows, scope),
                 Gemm(f"{prefix}_down", f, hidden, layers, rows, scope, "row")]


def gemms(arch: ModelArch) -> tuple[Gemm, ...]:
    """Every weight GEMM one token goes through in a forward pass, with its shape."""
    h, at, L = arch.hidden_size, arch.attention, arch.num_layers
    out: list[Gemm] = []
    if at.kind == "mla":
        # Megatron-Core keeps the low-rank down projections whole on every TP rank
        if at.q_lora_rank is None:
            out.append(Gemm("q", h, at.q_width, L))
        else:
            out += [Gemm("q_down", h, at.q_lora_rank, L, split="replicated"),
                    Gemm("q_up", at.q_lora_rank, at.q_width, L)]
        kv_up = at.num_heads * (at.head_dim - at.qk_rope_head_dim + at.v_head_dim)
        out += [Gemm("kv_down", h, at.kv_lora_rank + at.qk_rope_head_dim, L,
                     split="replicated"),
                Gemm("kv_up", at.kv_lora_rank, kv_up, L)]
    else:
        out.append(Gemm("qkv", h, at.q_width + 2 * at.num_kv_heads * at.head_dim, L))
    out.append(Gemm("attn_out", at.out_width, h, L, split="row"))
    if arch.num_dense_layers:
        out += _mlp_gemms("mlp", arch.mlp, h, arch.num_dense_layers, 1.0, "dense_mlp")
    if arch.is_moe:
        moe, n = arch.moe, arch.num_moe_layers
        out.append(Gemm("router", h, moe.num_experts, n, scope="moe", split="replicated"))
        out += _mlp_gemms("expert", moe.expert, h, n, float(moe.experts_per_token), "moe")
        if moe.shared:
            out += _mlp_gemms("shared", moe.shared, h, n, 1.0, "moe")
        if moe.shared_gate:
            out.append(Gemm("shared_gate", h, 1, n, scope="moe", split="replicated"))
    out.append(Gemm("lm_head", h, arch.vocab_size, 1, scope="head"))
    return tuple(out)


def matmul_flops_per_token(arch: ModelArch) -> float:
    """Forward FLOPs of all weight GEMMs for one token (about 2 x active parameters)."""
    return sum(g.flops_per_token for g in gemms(arch))


def _windowed_share(arch: ModelArch) -> float:
    return arch.num_windowed_layers / arch.num_layers


def attention_flops_per_query(arch: ModelArch, context_len) -> np.ndarray | float:
    """Forward attention FLOPs of one query token that attends to `context_len` keys, over
    all layers: 2 a (d_qk + d_v) per key per layer. A sliding window caps the keys of the
    layers that use it."""
    at = arch.attention
    keys = np.asarray(context_len, dtype=float)
    if at.sliding_window:
        share = _windowed_share(arch)
        keys = share * np.minimum(keys, at.sliding_window) + (1.0 - share) * keys
    return 2.0 * arch.num_layers * at.num_heads * (at.head_dim + at.v_head_dim) * keys


def attended_keys_per_sequence(arch: ModelArch, seq_len, *, causal: bool = True):
    """Sum over the seq_len queries of the keys each attends to, averaged over the layers.

    Causal: query i (1-based) sees min(i, w) keys in a layer with a window w, i keys in
    the others: s(s+1)/2 without a window.

    Non-causal (the MFU convention of PaLM App. B and Narayanan et al. 2021 eq. 3, which
    count every query against the whole sequence; without a window also what a masked
    dense matmul scores): s keys per query, s * s. A window w caps what a query attends at
    w keys wherever it sits, so a layer with a window counts min(s, w) keys per query,
    s * min(s, w): keys outside the window are no part of the model's computation, and
    counting them put the MFU of long windowed sequences above 100 %.
    """
    s = np.asarray(seq_len, dtype=float)
    w = arch.attention.sliding_window
    share = _windowed_share(arch) if w else 0.0
    if not causal:
        windowed = s * np.minimum(s, w) if w else s * s
        return share * windowed + (1.0 - share) * s * s
    full = s * (s + 1) / 2
    if not w:
        return full
    windowed = np.where(s <= w, full, w * (w + 1) / 2 + (s - w) * w)
    return share * windowed + (1.0 - share) * full


def forward_flops_per_sequence(arch: ModelArch, seq_len, *, causal: bool = True):
    """Forward FLOPs for one sequence of seq_len tokens (training or prefill)."""
    s = np.asarray(seq_len, dtype=float)
    per_key = attention_flops_per_query(arch, 1.0)
    return s * matmul_flops_per_token(arch) + per_key * attended_keys_per_sequence(
        arch, s, causal=causal)


def forward_flops_per_token(arch: ModelArch, seq_len, *, causal: bool = True):
    """Average forward FLOPs per token of a seq_len-token sequence."""
    return forward_flops_per_sequence(arch, seq_len, causal=causal) / np.asarray(seq_len, float)


@dataclass(frozen=True, slots=True)
class TrainingFlops:
    """Per sequence. `model` is the useful work (MFU numerator, 3 x forward); `hardware`
    adds what recomputation repeats (HFU numerator)."""

    model: float
    hardware: float
    forward: float


def training_flops_per_sequence(arch: ModelArch, seq_len: int, *, recompute: str = "none",
                                causal: bool = True) -> TrainingFlops:
    """Full recompute repeats the forward of every transformer layer (not the LM head,
    which is outside the checkpointed layers: hence Narayanan et al.'s V/(16lh) term);
    selective recompute (Korthikanti et al. 2022) repeats only the attention
    core (Q K^T, softmax, P V)."""
    forward = float(forward_flops_per_sequence(arch, seq_len, causal=causal))
    attention_core = float(attention_flops_per_query(arch, 1.0)
                           * attended_keys_per_sequence(arch, seq_len, causal=causal))
    lm_head = 2.0 * arch.hidden_size * arch.vocab_size * seq_len
    extra = {"none": 0.0, "selective": attention_core, "full": forward - lm_head}[recompute]
    return TrainingFlops(model=3 * forward, hardware=3 * forward + extra, forward=forward)


def executed_share_of_model_flops(arch: ModelArch, seq_len: int) -> float:
    """Causal training FLOPs over the MFU convention's (attention over the whole sequence):
    the share of the counted work that causal kernels (FlashAttention skips the masked
    blocks) execute. Near 1 at short sequences; about 0.5 where attention dominates."""
    return (training_flops_per_sequence(arch, seq_len).model
            / training_flops_per_sequence(arch, seq_len, causal=False).model)
