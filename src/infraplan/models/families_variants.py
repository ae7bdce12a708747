"""Families that vary the Llama recipe: where the norms sit, which layers attend within a
sliding window, attention and MLP in parallel, biases and sink logits.

Each reader follows its `transformers` configuration class and modeling file (keys,
defaults, module shapes); tests/models/test_against_transformers.py checks the parameter
counts against real models built from tiny configs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

from infraplan.errors import InputError
from infraplan.models.arch import AttentionSpec, MlpSpec, ModelArch, MoeSpec
from infraplan.models.config_reader import (ConfigReader, common_fields, gqa_attention,
                                            with_moe)


def windowed_layers(cfg: ConfigReader, num_layers: int,
                    default: Callable[[int], int] | None = None) -> int | None:
    """How many layers attend within the sliding window (or, Llama 4, within a chunk).
    `layer_types` (transformers 5 writes it into every config it saves) names each layer;
    older files leave the pattern to the family's modeling code (`default`); None means
    every layer."""
    types = cfg.get("layer_types", default=None)
    if types is not None:
        if not isinstance(types, list) or len(types) != num_layers:
            raise InputError(f"{cfg.origin}: layer_types must list one entry per layer "
                             f"({num_layers}), got {types!r}")
        return sum(t in ("sliding_attention", "chunked_attention") for t in types)
    return default(num_layers) if default else None


def _every_other(num_layers: int) -> int:
    """Gemma 2, gpt-oss: layers 0, 2, 4, ... are local."""
    return math.ceil(num_layers / 2)


def _all_but_every(key: str, period: int, cfg: ConfigReader) -> Callable[[int], int]:
    """Gemma 3, Cohere 2, EXAONE 4, OLMo 3: every `period`-th layer is global."""
    p = cfg.int(key, default=period)
    return lambda n: n - n // p


def with_window(arch: ModelArch, cfg: ConfigReader,
                 default: Callable[[int], int] | None) -> ModelArch:
    if not arch.attention.sliding_window:
        return arch
    count = windowed_layers(cfg, arch.num_layers, default)
    return replace(arch, attention=replace(arch.attention, windowed_layers=count))


def _attention(cfg: ConfigReader, *, bias: bool, o_bias: bool | None = None,
               qk_norm: bool = False, full_width: bool = False) -> AttentionSpec:
    at = gqa_attention(cfg, cfg.int("hidden_size"), qkv_bias=bias,
                       o_bias=bias if o_bias is None else o_bias, qk_norm=qk_norm)
    return replace(at, qk_norm_full_width=full_width)


def _gated(cfg: ConfigReader, width_key: str = "intermediate_size", *, bias: bool = False,
           act: str = "silu") -> MlpSpec:
    return MlpSpec(intermediate_size=cfg.int(width_key), gated=True,
                   activation=cfg.text("hidden_activation", "hidden_act", default=act),
                   bias=bias)


def llama_like(cfg: ConfigReader, name: str, *, qkv_bias: bool | None = None,
                o_bias: bool | None = None, qk_norm: bool = False,
                tie_default: bool = False, act_default: str = "silu") -> ModelArch:
    """The Llama recipe (llama, mistral, qwen2, qwen3, phi3, gemma and the variants below):
    RMSNorm, RoPE, gated MLP, GQA. A bias left as None follows the config's
    `attention_bias` (default false)."""
    attention_bias = cfg.bool("attention_bias", default=False)
    return ModelArch(
        **common_fields(cfg, name, tie_default=tie_default),
        norm="rmsnorm", norm_bias=False, learned_positions=False,
        attention=_attention(cfg, bias=attention_bias if qkv_bias is None else qkv_bias,
                             o_bias=attention_bias if o_bias is None else o_bias,
                             qk_norm=qk_norm),
        mlp=_gated(cfg, bias=cfg.bool("mlp_bias", default=False), act=act_default),
    )


def gemma2(cfg: ConfigReader, name: str, *, qk_norm: bool = False,
           pattern: Callable[[int], int] | None = _every_other) -> ModelArch:
    """Gemma 2 / Gemma 3: a norm before and after both attention and MLP (four per
    layer), GeGLU, tied embeddings, local layers alternating with global ones."""
    arch = llama_like(cfg, name, qk_norm=qk_norm, tie_default=True,
                      act_default="gelu_pytorch_tanh")
    return with_window(replace(arch, norms_per_layer=4), cfg, pattern)


def gemma3(cfg: ConfigReader, name: str) -> ModelArch:
    return gemma2(cfg, name, qk_norm=True,
                  pattern=_all_but_every("sliding_window_pattern", 6, cfg))


def olmo(cfg: ConfigReader, name: str) -> ModelArch:
    """OLMo 1: LayerNorm without weight or bias (Groeneveld et al. 2024, Sec. 2.1)."""
    return ModelArch(**common_fields(cfg, name, tie_default=False), norm="layernorm",
                     norm_bias=False, norm_weight=False, learned_positions=False,
                     attention=_attention(cfg, bias=cfg.bool("attention_bias", default=False)),
                     mlp=_gated(cfg))


def olmo2(cfg: ConfigReader, name: str, *,
          pattern: Callable[[int], int] | None = None) -> ModelArch:
    """OLMo 2 / 3: RMSNorm after attention and MLP, q/k RMSNorm over the whole projection
    (OLMo 2 report, Sec. 3.1); OLMo 3 adds sliding-window layers."""
    arch = llama_like(cfg, name, qk_norm=True)
    arch = replace(arch, attention=replace(arch.attention, qk_norm_full_width=True))
    return with_window(arch, cfg, pattern)


def olmo3(cfg: ConfigReader, name: str) -> ModelArch:
    return olmo2(cfg, name, pattern=lambda n: n - n // 4)


def olmoe(cfg: ConfigReader, name: str) -> ModelArch:
    """OLMoE: OLMo 2's attention, an MoE block of `num_experts` SwiGLU experts in every
    layer."""
    dense = olmo2(cfg, name)
    moe = MoeSpec(num_experts=cfg.int("num_experts"),
                  experts_per_token=cfg.int("num_experts_per_tok"), expert=dense.mlp)
    return with_moe(dense, moe, tuple(range(dense.num_layers)), cfg)


def cohere(cfg: ConfigReader, name: str, *,
           pattern: Callable[[int], int] | None = None) -> ModelArch:
    """Command R (Cohere): one LayerNorm without bias feeds attention and MLP in parallel,
    tied embeddings, optional q/k LayerNorm over all heads; Cohere 2 adds local layers."""
    attention = _attention(cfg, bias=cfg.bool("attention_bias", default=False),
                           qk_norm=cfg.bool("use_qk_norm", default=False), full_width=True)
    arch = ModelArch(**common_fields(cfg, name, tie_default=True), norm="layernorm",
                     norm_bias=False, learned_positions=False, attention=attention,
                     mlp=_gated(cfg), norms_per_layer=1, parallel_residual=True)
    return with_window(arch, cfg, pattern)


def cohere2(cfg: ConfigReader, name: str) -> ModelArch:
    return cohere(cfg, name, pattern=_all_but_every("sliding_window_pattern", 4, cfg))


def exaone4(cfg: ConfigReader, name: str) -> ModelArch:
    """EXAONE 4: norms after attention and MLP, per-head q/k RMSNorm, every fourth layer
    global when a window is set."""
    arch = llama_like(cfg, name, qkv_bias=False, o_bias=False, qk_norm=True)
    return with_window(arch, cfg, _all_but_every("sliding_window_pattern", 4, cfg))


def stablelm(cfg: ConfigReader, name: str) -> ModelArch:
    """StableLM (2): LayerNorm with bias, SwiGLU, optional q/k/v bias and parallel
    attention + MLP."""
    if cfg.bool("qk_layernorm", default=False):
        raise InputError(f"{cfg.origin}: qk_layernorm (StableLM 2 12B's per-head norms) is "
                         "not supported", fix="remove qk_layernorm or set it to false")
    parallel = cfg.bool("use_parallel_residual", default=False)
    return ModelArch(**common_fields(cfg, name, tie_default=False), norm="layernorm",
                     norm_bias=True, learned_positions=False,
                     attention=_attention(cfg, bias=cfg.bool("use_qkv_bias", default=False),
                                          o_bias=False),
                     mlp=_gated(cfg), norms_per_layer=1 if parallel else 2,
                     parallel_residual=parallel)


def phi(cfg: ConfigReader, name: str) -> ModelArch:
    """Phi-1/1.5/2: one biased LayerNorm feeds attention and a GeLU MLP in parallel; every
    linear is biased, the LM head too; optional per-head q/k LayerNorm."""
    return ModelArch(**common_fields(cfg, name, tie_default=False), norm="layernorm",
                     norm_bias=True, learned_positions=False,
                     attention=_attention(cfg, bias=True,
                                          qk_norm=cfg.bool("qk_layernorm", default=False)),
                     mlp=MlpSpec(intermediate_size=cfg.int("intermediate_size"), gated=False,
                                 activation=cfg.text("hidden_act", default="gelu_new"),
                                 bias=True),
                     norms_per_layer=1, parallel_residual=True, lm_head_bias=True)


def gpt_oss(cfg: ConfigReader, name: str) -> ModelArch:
    """gpt-oss: biased attention with a learned sink logit per head, local (128-token)
    layers alternating with global ones, an MoE block of biased SwiGLU experts in every
    layer with a biased router (gpt-oss model card, Sec. 2)."""
    bias = cfg.bool("attention_bias", default=True)
    expert = _gated(cfg, bias=True)
    arch = llama_like(cfg, name, qkv_bias=bias, o_bias=bias)
    arch = replace(arch, attention=replace(arch.attention, sinks=True), mlp=expert)
    moe = MoeSpec(num_experts=cfg.int("num_local_experts"),
                  experts_per_token=cfg.int("num_experts_per_tok"), expert=expert,
                  router_bias=True)
    return with_window(with_moe(arch, moe, tuple(range(arch.num_layers)), cfg), cfg,
                       _every_other)


def llama4(cfg: ConfigReader, name: str) -> ModelArch:
    """Llama 4 (text): MoE layers (`moe_layers`, else every `interleave_moe_layer_step`-th)
    of routed SwiGLU experts plus one shared expert, dense layers of width
    `intermediate_size_mlp`; its q/k norm is a parameter-free L2 norm. Three layers in four
    attend within chunks of `attention_chunk_size` tokens, counted as a window of that size:
    the cache bound is the same, the attended keys are over-counted by up to 2x on those
    layers beyond one chunk (a chunk's queries see C/2 keys on average, a window's C)."""
    dense = ModelArch(**common_fields(cfg, name, tie_default=False), norm="rmsnorm",
                      norm_bias=False, learned_positions=False,
                      attention=_attention(cfg, bias=cfg.bool("attention_bias", default=False)),
                      mlp=_gated(cfg, "intermediate_size_mlp"))
    expert = _gated(cfg)
    moe = MoeSpec(num_experts=cfg.int("num_local_experts"),
                  experts_per_token=cfg.int("num_experts_per_tok", default=1), expert=expert,
                  shared=expert)
    n, step = dense.num_layers, cfg.int("interleave_moe_layer_step", default=1)
    layers = cfg.int_list("moe_layers") if cfg.get("moe_layers", default=None) is not None \
        else list(range(step - 1, n, step))
    chunk = cfg.optional_int("attention_chunk_size")
    arch = with_moe(dense, moe, tuple(layers), cfg)
    if chunk is None:
        return arch
    interval = cfg.int("no_rope_layer_interval", default=4)
    arch = replace(arch, attention=replace(arch.attention, sliding_window=chunk))
    return with_window(arch, cfg, lambda k: k - k // interval)
