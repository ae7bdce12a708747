"""Exact parameter counts, total and active, by component.

Counts follow the module shapes of the `transformers` implementations (biases and norm
vectors included, buffers excluded), so `ParamCounts.total` equals
`sum(p.numel() for p in model.parameters())` of the real model; the tests check this for
every supported family. Active parameters (MoE) are those one token touches: attention,
norms, embeddings, the router, shared experts and `experts_per_token` routed experts.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from infraplan.models.arch import MlpSpec, ModelArch
from infraplan.units import format_count


def linear_params(fan_in: int, fan_out: int, bias: bool) -> int:
    return fan_in * fan_out + (fan_out if bias else 0)


def mlp_params(mlp: MlpSpec, hidden: int) -> int:
    """Gated (SwiGLU): gate and up h->f, down f->h; plain: up h->f, down f->h."""
    up = linear_params(hidden, mlp.intermediate_size, mlp.bias)
    down = linear_params(mlp.intermediate_size, hidden, mlp.bias)
    return up * (2 if mlp.gated else 1) + down


def norm_params(arch: ModelArch, width: int) -> int:
    return width * (int(arch.norm_weight) + int(arch.norm_bias))


def attention_params(arch: ModelArch) -> int:
    at, h = arch.attention, arch.hidden_size
    if at.kind == "mla":
        # DeepSeek-V2 Sec. 2.1.2-2.1.3: q = W_UQ RMSNorm(W_DQ x); [c_kv, k_rope] = W_DKV x;
        # [k_nope, v] = W_UKV RMSNorm(c_kv); o = W_O attn. Latent norms are RMSNorm.
        if at.q_lora_rank is None:
            q = linear_params(h, at.q_width, at.qkv_bias)
        else:
            q = (linear_params(h, at.q_lora_rank, at.qkv_bias) + at.q_lora_rank
                 + linear_params(at.q_lora_rank, at.q_width, False))
        kv_up = at.num_heads * (at.head_dim - at.qk_rope_head_dim + at.v_head_dim)
        kv = (linear_params(h, at.kv_lora_rank + at.qk_rope_head_dim, at.qkv_bias)
              + at.kv_lora_rank + linear_params(at.kv_lora_rank, kv_up, False))
        return q + kv + linear_params(at.out_width, h, at.o_bias)
    q = linear_params(h, at.q_width, at.qkv_bias)
    kv = 2 * linear_params(h, at.num_kv_heads * at.head_dim, at.qkv_bias)
    qk_width = at.q_width + at.num_kv_heads * at.head_dim if at.qk_norm_full_width \
        else 2 * at.head_dim
    qk_norm = norm_params(arch, qk_width) if at.qk_norm else 0
    sinks = at.num_heads if at.sinks else 0
    return q + kv + linear_params(at.out_width, h, at.o_bias) + qk_norm + sinks


@dataclass(frozen=True, slots=True)
class LayerParams:
    """One decoder layer's parameters by component."""

    attention: int
    norms: int  # the layer's norms (two pre-norms in most): replicated under TP
    mlp: int  # dense FFN; 0 on an MoE layer
    routed_experts: int  # all routed experts of the layer together
    shared_experts: int  # shared experts (and Qwen2-MoE's shared-expert gate)
    router: int
    active_routed: int  # the routed-expert parameters one token touches

    @property
    def total(self) -> int:
        return (self.attention + self.norms + self.mlp + self.routed_experts
                + self.shared_experts + self.router)

    @property
    def active(self) -> int:
        return self.total - self.routed_experts + self.active_routed

    @property
    def dense(self) -> int:
        """Everything but the routed experts (what tensor parallelism alone shards)."""
        return self.total - self.routed_experts


def layer_params(arch: ModelArch, index: int) -> LayerParams:
    h = arch.hidden_size
    common = dict(attention=attention_params(arch),
                  norms=arch.norms_per_layer * norm_params(arch, h))
    if not arch.layer_is_moe(index):
        return LayerParams(**common, mlp=mlp_params(arch.mlp, h), routed_experts=0,
                           shared_experts=0, router=0, active_routed=0)
    moe = arch.moe
    assert moe is not None
    one_expert = mlp_params(moe.expert, h)
    shared = mlp_params(moe.shared, h) if moe.shared else 0
    if moe.shared_gate:
        shared += linear_params(h, 1, False)
    router = linear_params(h, moe.num_experts, moe.router_bias)
    return LayerParams(**common, mlp=0, routed_experts=moe.num_experts * one_expert,
                       shared_experts=shared, router=router,
                       active_routed=moe.experts_per_token * one_expert)


@dataclass(frozen=True)
class ParamCounts:
    arch: ModelArch

    @cached_property
    def layers(self) -> tuple[LayerParams, ...]:
        # Layers of one kind share a shape: compute each kind once.
        kinds: dict[bool, LayerParams] = {}
        return tuple(kinds.setdefault(self.arch.layer_is_moe(i), layer_params(self.arch, i))
                     for i in range(self.arch.num_layers))

    @property
    def embedding(self) -> int:
        return self.arch.vocab_size * self.arch.hidden_size

    @property
    def position_embedding(self) -> int:
        a = self.arch
        rows = a.max_position_embeddings + a.position_offset
        return rows * a.hidden_size if a.learned_positions else 0

    @property
    def lm_head(self) -> int:
        """Separate output projection (0 when tied to the input embedding), its bias."""
        bias = self.arch.vocab_size if self.arch.lm_head_bias else 0
        return bias + (0 if self.arch.tie_word_embeddings else self.embedding)

    @property
    def final_norm(self) -> int:
        return norm_params(self.arch, self.arch.hidden_size)

    @property
    def embedding_norm(self) -> int:
        """BLOOM's norm right after the token embedding; 0 elsewhere."""
        return norm_params(self.arch, self.arch.hidden_size) if self.arch.embedding_norm else 0

    @property
    def outside_layers(self) -> int:
        return (self.embedding + self.position_embedding + self.embedding_norm + self.lm_head
                + self.final_norm)

    @cached_property
    def total(self) -> int:
        return self.outside_layers + sum(layer.total for layer in self.layers)

    @cached_property
    def active(self) -> int:
        return self.outside_layers + sum(layer.active for layer in self.layers)

    @cached_property
    def routed_experts(self) -> int:
        return sum(layer.routed_experts for layer in self.layers)

    @cached_property
    def non_embedding(self) -> int:
        """Kaplan et al. 2020's N: everything but the embedding and position tables."""
        return self.total - self.embedding - self.position_embedding


def param_counts(arch: ModelArch) -> ParamCounts:
    return ParamCounts(arch)


def uncounted_notes(arch: ModelArch) -> list[str]:
    """What the counts leave out: a multimodal checkpoint's encoders, each with the estimate
    of its size that families._towers made (two figures: it is a floor, not a count), and
    a quantized checkpoint's format that infraplan does not model."""
    notes = []
    if arch.unmodelled_quantization:
        notes.append(f"the checkpoint's quantization_config ({arch.unmodelled_quantization}) "
                     "is not a format infraplan models: its weights are planned from the "
                     "16-bit shapes (a serving deployment's weight_dtype sets the format "
                     "served)")
    if not arch.towers:  # the common case: no count to make (memory fixes call this often)
        return notes
    language = param_counts(arch).total
    for tower in arch.towers:
        shape = ", ".join(part for part in (
            tower.model_type, tower.layers and f"{tower.layers} layers",
            tower.hidden_size and f"hidden {tower.hidden_size}") if part) or "no shape given"
        if tower.params_estimate:
            share = tower.params_estimate / language
            shape += (f"; about {format_count(tower.params_estimate)} parameters, "
                      + (f"{share:.0%}" if share >= 0.005 else "under 1%")
                      + " of the language model's")
        notes.append(f"the {tower.kind} tower ({shape}) is not counted: infraplan plans the "
                     "language model of a multimodal checkpoint")
    return notes
