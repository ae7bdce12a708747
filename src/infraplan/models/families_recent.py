"""Families of 2024-2025 that reuse the Llama and DeepSeek recipes with other keys and
defaults: GLM, PhiMoE, DBRX, ERNIE 4.5, Seed-OSS, SmolLM3, dots.llm1, Hunyuan, Arcee.

Each reader follows its `transformers` 5 configuration class and modeling file (cited per
reader as models/<family>/modeling_<family>.py). Where a missing key's `transformers`
default differs from the generic fallback of `llama_like` (a head width of 128 rather than
h / a, biased q/k/v, fewer key/value heads), the default is written down here; keys that a
family's modeling file ignores (an `mlp_bias`, a `sliding_window`) are pinned so that they
cannot add weights or windows that `transformers` never builds.
tests/models/test_against_transformers.py checks every reader against real models built
from tiny configs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from infraplan.errors import InputError
from infraplan.models import families_gpt as gpt
from infraplan.models import families_variants as var
from infraplan.models.arch import MlpSpec, ModelArch, MoeSpec
from infraplan.models.config_reader import ConfigReader, group_limited_moe, with_moe

# the family's modeling file has no sliding-window attention and no MLP bias
_PLAIN = dict(sliding_window=None, mlp_bias=False)


def _view(cfg: ConfigReader, defaults: Mapping[str, Any] | None = None,
          **fixed: Any) -> ConfigReader:
    """`cfg` as the family's config class sees it: `defaults` fill the keys the file leaves
    out, `fixed` sets keys the modeling file ignores or reads under another name."""
    return ConfigReader({**cfg.raw, **fixed}, cfg.origin, {**cfg.defaults, **(defaults or {})})


def _sub(cfg: ConfigReader, key: str) -> ConfigReader:
    """A nested config object (DBRX's attn_config, ffn_config)."""
    raw = cfg.get(key, default={})
    if not isinstance(raw, Mapping):
        raise InputError(f"{cfg.origin}: {key} must be a JSON object, got {raw!r}")
    return ConfigReader(raw, f"{cfg.origin} {key}")


def _experts(cfg: ConfigReader, *, count: int = 1, bias: bool = False) -> MlpSpec:
    """`count` SwiGLU experts of moe_intermediate_size fused into one MLP."""
    one = var._gated(cfg, "moe_intermediate_size", bias=bias)
    return replace(one, intermediate_size=one.intermediate_size * count)


def _deepseek_moe(cfg: ConfigReader, dense: ModelArch) -> ModelArch:
    """DeepSeek-V3's MoE block (glm4_moe, dots1): `n_routed_experts` SwiGLU experts of
    `moe_intermediate_size`, one shared MLP `n_shared_experts` times as wide, a router
    without bias (its e_score_correction_bias is a buffer, not a parameter), dense FFNs on
    the first `first_k_dense_replace` layers. transformers models/glm4_moe/
    modeling_glm4_moe.py: Glm4MoeMoE, Glm4MoeTopkRouter, Glm4MoeDecoderLayer (dots1 same)."""
    first = cfg.int("first_k_dense_replace", default=0, minimum=0)
    layers = tuple(range(first, dense.num_layers))
    return with_moe(dense, group_limited_moe(cfg, routed=bool(layers)), layers, cfg)


def _all_layers(arch: ModelArch, moe: MoeSpec, cfg: ConfigReader) -> ModelArch:
    return with_moe(arch, moe, tuple(range(arch.num_layers)), cfg)


def glm(cfg: ConfigReader, name: str, *, norms_per_layer: int = 2) -> ModelArch:
    """GLM-4 (glm) and GLM-4-0414 (glm4): Llama shapes with biased q, k, v (o unbiased),
    gate and up fused into one linear; glm4 adds norms after attention and MLP (four per
    layer). transformers models/glm/modeling_glm.py: GlmAttention, GlmMLP; models/glm4/
    modeling_glm4.py: Glm4DecoderLayer post_self_attn_layernorm, post_mlp_layernorm."""
    # GlmConfig / Glm4Config defaults: attention_bias true, head_dim 128, 2 kv heads
    view = _view(cfg, dict(attention_bias=True, head_dim=128, num_key_value_heads=2),
                 **_PLAIN)
    return replace(var.llama_like(view, name, o_bias=False), norms_per_layer=norms_per_layer)


def glm4(cfg: ConfigReader, name: str) -> ModelArch:
    return glm(cfg, name, norms_per_layer=4)


def glm4_moe(cfg: ConfigReader, name: str) -> ModelArch:
    """GLM-4.5 / 4.6: biased q, k, v (by attention_bias), optional per-head q/k RMSNorm
    (use_qk_norm), DeepSeek-V3's MoE block; the MTP layers are reported, not built.
    transformers models/glm4_moe/modeling_glm4_moe.py: Glm4MoeAttention."""
    # Glm4MoeConfig defaults: 8 kv heads, 1 shared expert, first layer dense, 1 MTP layer
    view = _view(cfg, dict(num_key_value_heads=8, n_shared_experts=1,
                           first_k_dense_replace=1), **_PLAIN)
    dense = var.llama_like(view, name, o_bias=False,
                           qk_norm=view.bool("use_qk_norm", default=False))
    mtp = view.int("num_nextn_predict_layers", "num_mtp_layers", default=1, minimum=0)
    return _deepseek_moe(view, replace(dense, mtp_layers=mtp))


def dots1(cfg: ConfigReader, name: str) -> ModelArch:
    """dots.llm1: per-head q/k RMSNorm, every projection biased by attention_bias,
    DeepSeek-V3's MoE block; layers from max_window_layers on attend within the window
    (Dots1Config builds layer_types so, whatever use_sliding_window says).
    transformers models/dots1/modeling_dots1.py: Dots1Attention, Dots1MoE."""
    # Dots1Config defaults: 32 kv heads, a 4096-token window from layer 62 on
    view = _view(cfg, dict(num_key_value_heads=32, sliding_window=4096,
                           max_window_layers=62), mlp_bias=False)
    window = view.get("sliding_window", default=None)
    view = _view(view, use_sliding_window=window is not None)
    first = view.int("max_window_layers", minimum=0)
    arch = var.with_window(var.llama_like(view, name, qk_norm=True), view,
                           lambda n: max(n - first, 0))
    if not arch.num_windowed_layers:  # a window that no layer uses
        arch = replace(arch, attention=replace(arch.attention, sliding_window=None,
                                               windowed_layers=None))
    return _deepseek_moe(view, arch)


def phimoe(cfg: ConfigReader, name: str) -> ModelArch:
    """Phi-3.5-MoE: Mixtral's layout (a SwiGLU expert of intermediate_size per routed
    expert, every layer MoE, unbiased router) with biased LayerNorms, attention biases by
    attention_bias and an optional LM-head bias. transformers models/phimoe/
    modeling_phimoe.py: PhimoeDecoderLayer (nn.LayerNorm), PhimoeForCausalLM lm_head."""
    view = _view(cfg, dict(num_key_value_heads=8), mlp_bias=False)  # PhimoeConfig: 8 kv
    dense = replace(var.llama_like(view, name), norm="layernorm", norm_bias=True,
                    lm_head_bias=view.bool("lm_head_bias", default=False))
    moe = MoeSpec(num_experts=view.int("num_local_experts", default=16),
                  experts_per_token=view.int("num_experts_per_tok", default=2),
                  expert=dense.mlp)
    return _all_layers(dense, moe, view)


def dbrx(cfg: ConfigReader, name: str) -> ModelArch:
    """DBRX: weight-only LayerNorms, one unbiased fused Wqkv (kv_n_heads key/value heads),
    an MoE block of SwiGLU experts (w1, v1, w2) in every layer, an unbiased router, an
    untied LM head. Attention and MoE settings sit in nested attn_config / ffn_config.
    transformers models/dbrx/modeling_dbrx.py: DbrxAttention, DbrxExpertGLU, DbrxRouter,
    DbrxNormAttentionNorm (nn.LayerNorm(bias=False))."""
    attn, ffn = _sub(cfg, "attn_config"), _sub(cfg, "ffn_config")
    act = _sub(ffn, "ffn_act_fn")  # DbrxFFNConfig: {"name": "silu"} unless given
    arch = gpt._decoder(
        cfg, name, hidden=cfg.int("d_model"), heads=cfg.int("n_heads"),
        kv_heads=attn.int("kv_n_heads", default=1), layers=cfg.int("n_layers"),
        ffn=ffn.int("ffn_hidden_size", default=3584),
        activation=act.text("name", default="silu"), qkv_bias=False, o_bias=False,
        mlp_bias=False, max_positions=cfg.int("max_seq_len", default=2048),
        tie_default=False, norm_bias=False, dtype_default="bfloat16",
        hidden_dropout=cfg.fraction("resid_pdrop", default=0.0),
        attention_dropout=attn.fraction("attn_pdrop", default=0.0))
    expert = replace(arch.mlp, gated=True)
    moe = MoeSpec(num_experts=ffn.int("moe_num_experts", default=4),
                  experts_per_token=ffn.int("moe_top_k", default=1), expert=expert)
    return _all_layers(replace(arch, mlp=expert), moe, cfg)


def ernie4_5(cfg: ConfigReader, name: str) -> ModelArch:
    """ERNIE 4.5 (dense): Llama shapes, one `use_bias` key biasing every attention and MLP
    linear, tied embeddings. transformers models/ernie4_5/modeling_ernie4_5.py:
    Ernie4_5Attention, Ernie4_5MLP (bias=config.use_bias)."""
    # Ernie4_5Config defaults: head_dim 128, 2 kv heads, tied embeddings
    return _ernie(_view(cfg, dict(head_dim=128, num_key_value_heads=2)), name)


def _ernie(cfg: ConfigReader, name: str) -> ModelArch:
    bias = cfg.bool("use_bias", default=False)
    view = _view(cfg, attention_bias=bias, mlp_bias=bias, sliding_window=None)
    return var.llama_like(view, name, tie_default=True)


def ernie4_5_moe(cfg: ConfigReader, name: str) -> ModelArch:
    """ERNIE 4.5 MoE: ERNIE's attention, MoE on layers start..end (inclusive) where
    (i + 1) % moe_layer_interval == 0, `moe_num_shared_experts` shared experts fused into
    one MLP (biased like the dense MLP), unbiased routed experts, a router weight plus an
    e_score_correction_bias parameter per expert, an LM-head bias by use_bias.
    transformers models/ernie4_5_moe/modeling_ernie4_5_moe.py: Ernie4_5_MoeDecoderLayer,
    Ernie4_5_MoeSparseMoeBlock, Ernie4_5_MoeStatics, Ernie4_5_MoeForCausalLM."""
    view = _view(cfg, dict(num_key_value_heads=4))  # Ernie4_5_MoeConfig: 4 kv heads
    bias = view.bool("use_bias", default=False)
    dense = replace(_ernie(view, name), lm_head_bias=bias)
    n_shared = view.int("moe_num_shared_experts", default=2, minimum=0)
    shared = _experts(view, count=n_shared, bias=bias) if n_shared else None
    moe = MoeSpec(num_experts=view.int("moe_num_experts", "num_experts", default=64),
                  experts_per_token=view.int("moe_k", "num_experts_per_tok", default=6),
                  expert=_experts(view), shared=shared,
                  router_bias=True)
    n = dense.num_layers
    start = view.int("moe_layer_start_index", default=1, minimum=0)
    end = view.int("moe_layer_end_index", default=-1, minimum=-1)
    end = n - 1 if end == -1 else end  # Ernie4_5_MoeConfig.__post_init__
    step = view.int("moe_layer_interval", default=1)
    layers = tuple(i for i in range(n) if (i + 1) % step == 0 and start <= i <= end)
    return with_moe(dense, moe, layers, view)


def seed_oss(cfg: ConfigReader, name: str) -> ModelArch:
    """Seed-OSS: Llama shapes with biased q, k, v (attention_bias, default true), o biased
    by attention_out_bias, dropout after attention and MLP (residual_dropout).
    transformers models/seed_oss/modeling_seed_oss.py: SeedOssAttention, SeedOssMLP."""
    # SeedOssConfig defaults: head_dim 128, 8 kv heads, dropouts 0.1
    view = _view(cfg, dict(attention_bias=True, head_dim=128, num_key_value_heads=8,
                           attention_dropout=0.1), sliding_window=None)
    arch = var.llama_like(view, name, o_bias=view.bool("attention_out_bias", default=False))
    return replace(arch, hidden_dropout=view.fraction("residual_dropout", default=0.1))


def smollm3(cfg: ConfigReader, name: str) -> ModelArch:
    """SmolLM3: Llama shapes, tied embeddings; with use_sliding_window, the NoPE layers
    (no_rope_layers 0, by default every no_rope_layer_interval-th) attend within the
    window. transformers models/smollm3/configuration_smollm3.py __post_init__,
    modeling_smollm3.py: SmolLM3Attention."""
    view = _view(cfg, dict(use_sliding_window=False))  # SmolLM3Config default
    rope = view.int_list("no_rope_layers")
    interval = view.int("no_rope_layer_interval", default=4)
    return var.with_window(var.llama_like(view, name, tie_default=True), view,
                           lambda n: rope.count(0) if rope else n // interval)


def hunyuan_dense(cfg: ConfigReader, name: str) -> ModelArch:
    """Hunyuan (dense): Llama shapes, per-head q/k RMSNorm (query_layernorm,
    key_layernorm), every attention projection biased by attention_bias. transformers
    models/hunyuan_v1_dense/modeling_hunyuan_v1_dense.py: HunYuanDenseV1Attention."""
    return var.llama_like(_view(cfg, **_PLAIN), name, qk_norm=True)


def hunyuan_moe(cfg: ConfigReader, name: str) -> ModelArch:
    """Hunyuan-A13B: Hunyuan's attention; every layer an MoE block of `num_experts` SwiGLU
    experts plus one shared MLP, all of intermediate_size (transformers builds neither from
    moe_intermediate_size nor from num_shared_expert), an unbiased router; moe_topk is one
    number or one per layer. transformers models/hunyuan_v1_moe/modeling_hunyuan_v1_moe.py:
    HunYuanMoEV1Moe, HunYuanMoEV1Gate, HunYuanMoEV1Experts."""
    dense = hunyuan_dense(cfg, name)
    moe = MoeSpec(num_experts=cfg.int("num_experts", default=1),
                  experts_per_token=_per_layer(cfg, "moe_topk", dense.num_layers),
                  expert=dense.mlp, shared=dense.mlp)
    return _all_layers(dense, moe, cfg)


def _per_layer(cfg: ConfigReader, key: str, num_layers: int) -> int:
    """A count given once or once per layer (Hunyuan's moe_topk); per-layer values must
    agree, as one MoE spec serves every layer."""
    if not isinstance(cfg.get(key, default=1), list):
        return cfg.int(key, default=1)
    values = cfg.int_list(key)
    if len(values) != num_layers or len(set(values)) != 1 or values[0] < 1:
        raise InputError(f"{cfg.origin}: {key} must be one whole number >= 1 or the same "
                         f"number for each of the {num_layers} layers, got {values!r}",
                         fix=f"set \"{key}\" to a single number")
    return values[0]


def arcee(cfg: ConfigReader, name: str) -> ModelArch:
    """Arcee (AFM): Llama attention with an ungated up/down MLP and squared ReLU, biases by
    attention_bias and mlp_bias. transformers models/arcee/modeling_arcee.py: ArceeMLP."""
    arch = var.llama_like(_view(cfg, sliding_window=None), name, act_default="relu2")
    return replace(arch, mlp=replace(arch.mlp, gated=False))
