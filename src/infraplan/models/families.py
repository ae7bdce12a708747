"""Read a Hugging Face `config.json` of a supported family into a `ModelArch`.

Each family's keys and defaults follow its `transformers` configuration class and modeling
file (the layer shapes are checked against real `transformers` models in
tests/models/test_against_transformers.py). A key missing from the file takes the default
that `transformers` would use.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from infraplan.errors import InputError
from infraplan.models.arch import AttentionSpec, MlpSpec, ModelArch, MoeSpec

_REQUIRED = object()


class ConfigReader:
    """Typed access to a config dict; errors name the file, the key and the fix."""

    def __init__(self, raw: Mapping[str, Any], origin: str):
        self.raw, self.origin = raw, origin

    def get(self, *keys: str, default: Any = _REQUIRED) -> Any:
        for key in keys:
            if self.raw.get(key) is not None:
                return self.raw[key]
        if default is _REQUIRED:
            raise InputError(f"{self.origin}: missing {keys[0]!r}",
                             fix=f"add \"{keys[0]}\" to the config (model_type "
                                 f"{self.raw.get('model_type')!r} needs it)")
        return default

    def int(self, *keys: str, default: Any = _REQUIRED, minimum: int = 1) -> int:
        value = self.get(*keys, default=default)
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise InputError(f"{self.origin}: {keys[0]} must be an integer >= {minimum}, "
                             f"got {value!r}")
        return value

    def bool(self, *keys: str, default: Any = _REQUIRED) -> bool:
        value = self.get(*keys, default=default)
        if not isinstance(value, bool):
            raise InputError(f"{self.origin}: {keys[0]} must be true or false, got {value!r}")
        return value

    def optional_int(self, *keys: str) -> int | None:
        return None if self.get(*keys, default=None) is None else self.int(*keys)

    def fraction(self, *keys: str, default: float) -> float:
        value = self.get(*keys, default=default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                not 0 <= value < 1:
            raise InputError(f"{self.origin}: {keys[0]} must be a number in [0, 1), "
                             f"got {value!r}")
        return float(value)

    def text(self, *keys: str, default: Any = _REQUIRED) -> str:
        value = self.get(*keys, default=default)
        if not isinstance(value, str):
            raise InputError(f"{self.origin}: {keys[0]} must be a string, got {value!r}")
        return value

    def int_list(self, *keys: str) -> list[int]:
        value = self.get(*keys, default=[])
        if not isinstance(value, list) or any(isinstance(v, bool) or not isinstance(v, int)
                                              for v in value):
            raise InputError(f"{self.origin}: {keys[0]} must be a list of layer indices, "
                             f"got {value!r}")
        return value


def _head_dim(cfg: ConfigReader, hidden: int, heads: int) -> int:
    explicit = cfg.get("head_dim", default=None)
    if explicit is not None:
        return cfg.int("head_dim")
    if hidden % heads:
        raise InputError(f"{cfg.origin}: hidden_size {hidden} is not divisible by "
                         f"num_attention_heads {heads}", fix="set head_dim explicitly")
    return hidden // heads


def _gqa_attention(cfg: ConfigReader, hidden: int, *, qkv_bias: bool, o_bias: bool,
                   qk_norm: bool = False) -> AttentionSpec:
    heads = cfg.int("num_attention_heads")
    kv_heads = cfg.int("num_key_value_heads", default=heads)
    if heads % kv_heads:
        raise InputError(f"{cfg.origin}: num_key_value_heads {kv_heads} must divide "
                         f"num_attention_heads {heads}")
    d = _head_dim(cfg, hidden, heads)
    window = cfg.optional_int("sliding_window")
    if not cfg.bool("use_sliding_window", default=window is not None):
        window = None
    return AttentionSpec(num_heads=heads, num_kv_heads=kv_heads, head_dim=d, v_head_dim=d,
                         qkv_bias=qkv_bias, o_bias=o_bias, qk_norm=qk_norm,
                         sliding_window=window)


def _common(cfg: ConfigReader, name: str, *, tie_default: bool, **extra: Any) -> dict:
    return dict(
        name=name,
        family=cfg.get("model_type"),
        hidden_size=cfg.int("hidden_size"),
        num_layers=cfg.int("num_hidden_layers"),
        vocab_size=cfg.int("vocab_size"),
        max_position_embeddings=cfg.int("max_position_embeddings", default=4096),
        tie_word_embeddings=cfg.bool("tie_word_embeddings", default=tie_default),
        dtype=str(cfg.get("torch_dtype", "dtype", default="bfloat16")),
        attention_dropout=cfg.fraction("attention_dropout", default=0.0),
        **extra,
    )


def _llama_like(cfg: ConfigReader, name: str, *, qkv_bias: bool | None = None,
                o_bias: bool | None = None, qk_norm: bool = False) -> ModelArch:
    """llama, mistral, qwen2, qwen3: RMSNorm, RoPE, SwiGLU, GQA. A bias left as None
    follows the config's `attention_bias` (default false)."""
    attention_bias = cfg.bool("attention_bias", default=False)
    return ModelArch(
        **_common(cfg, name, tie_default=False),
        norm="rmsnorm", norm_bias=False, learned_positions=False,
        attention=_gqa_attention(
            cfg, cfg.int("hidden_size"),
            qkv_bias=attention_bias if qkv_bias is None else qkv_bias,
            o_bias=attention_bias if o_bias is None else o_bias, qk_norm=qk_norm),
        mlp=MlpSpec(intermediate_size=cfg.int("intermediate_size"), gated=True,
                    activation=cfg.text("hidden_act", default="silu"),
                    bias=cfg.bool("mlp_bias", default=False)),
    )


def _mixtral(cfg: ConfigReader, name: str) -> ModelArch:
    dense = _llama_like(cfg, name)
    expert = dense.mlp  # each Mixtral expert is a full SwiGLU MLP of intermediate_size
    moe = MoeSpec(num_experts=cfg.int("num_local_experts"),
                  experts_per_token=cfg.int("num_experts_per_tok", default=2), expert=expert)
    return _with_moe(dense, moe, tuple(range(dense.num_layers)), cfg)


def _qwen_moe(cfg: ConfigReader, name: str, *, qk_norm: bool) -> ModelArch:
    """qwen2_moe / qwen3_moe: MoE on layers (i+1) % decoder_sparse_step == 0, except
    mlp_only_layers; qwen2_moe adds a gated shared expert."""
    if qk_norm:  # qwen3_moe: biases follow attention_bias
        dense = _llama_like(cfg, name, qk_norm=True)
    else:  # qwen2_moe: q, k, v biased by `qkv_bias` (default true), o never
        dense = _llama_like(cfg, name, qkv_bias=cfg.bool("qkv_bias", default=True),
                            o_bias=False)
    act = cfg.text("hidden_act", default="silu")
    expert = MlpSpec(intermediate_size=cfg.int("moe_intermediate_size"), gated=True,
                     activation=act)
    shared_width = cfg.int("shared_expert_intermediate_size", default=0, minimum=0)
    shared = MlpSpec(intermediate_size=shared_width, gated=True, activation=act) \
        if shared_width else None
    moe = MoeSpec(num_experts=cfg.int("num_experts"),
                  experts_per_token=cfg.int("num_experts_per_tok"), expert=expert,
                  shared=shared, shared_gate=shared is not None)
    step = cfg.int("decoder_sparse_step", default=1)
    dense_only = set(cfg.int_list("mlp_only_layers"))
    layers = tuple(i for i in range(dense.num_layers)
                   if i not in dense_only and (i + 1) % step == 0)
    return _with_moe(dense, moe, layers, cfg)


def _deepseek_v3(cfg: ConfigReader, name: str) -> ModelArch:
    """DeepSeek-V3: MLA attention, `first_k_dense_replace` dense layers, then MoE with
    shared experts (DeepSeek-V3 report, Sec. 2.1; HF modeling_deepseek_v3)."""
    heads = cfg.int("num_attention_heads")
    nope, rope = cfg.int("qk_nope_head_dim"), cfg.int("qk_rope_head_dim")
    bias = cfg.bool("attention_bias", default=False)
    attention = AttentionSpec(
        num_heads=heads, num_kv_heads=cfg.int("num_key_value_heads", default=heads),
        head_dim=nope + rope, v_head_dim=cfg.int("v_head_dim"), qkv_bias=bias, o_bias=bias,
        q_lora_rank=cfg.optional_int("q_lora_rank"), kv_lora_rank=cfg.int("kv_lora_rank"),
        qk_rope_head_dim=rope)
    act = cfg.text("hidden_act", default="silu")
    expert = MlpSpec(intermediate_size=cfg.int("moe_intermediate_size"), gated=True,
                     activation=act)
    n_shared = cfg.int("n_shared_experts", default=0, minimum=0)
    shared = MlpSpec(intermediate_size=expert.intermediate_size * n_shared, gated=True,
                     activation=act) if n_shared else None
    moe = MoeSpec(num_experts=cfg.int("n_routed_experts", "num_local_experts"),
                  experts_per_token=cfg.int("num_experts_per_tok"), expert=expert,
                  shared=shared)
    first_dense = cfg.int("first_k_dense_replace", default=0, minimum=0)
    freq = cfg.int("moe_layer_freq", default=1)
    num_layers = cfg.int("num_hidden_layers")
    arch = ModelArch(
        **_common(cfg, name, tie_default=False,
                  mtp_layers=cfg.int("num_nextn_predict_layers", default=0, minimum=0)),
        norm="rmsnorm", norm_bias=False, learned_positions=False, attention=attention,
        mlp=MlpSpec(intermediate_size=cfg.int("intermediate_size"), gated=True,
                    activation=act),
    )
    layers = tuple(i for i in range(num_layers) if i >= first_dense and i % freq == 0)
    return _with_moe(arch, moe, layers, cfg)


def _gpt2(cfg: ConfigReader, name: str) -> ModelArch:
    """GPT-2 / GPT-3 / Megatron GPT: LayerNorm with bias, learned positions, biased
    linears everywhere, GeLU MLP of width n_inner (default 4h), tied LM head."""
    hidden = cfg.int("n_embd", "hidden_size")
    heads = cfg.int("n_head", "num_attention_heads")
    if hidden % heads:
        raise InputError(f"{cfg.origin}: n_embd {hidden} is not divisible by n_head {heads}")
    d = hidden // heads
    return ModelArch(
        name=name, family="gpt2", hidden_size=hidden,
        num_layers=cfg.int("n_layer", "num_hidden_layers"), vocab_size=cfg.int("vocab_size"),
        max_position_embeddings=cfg.int("n_positions", "max_position_embeddings",
                                        default=1024),
        tie_word_embeddings=cfg.bool("tie_word_embeddings", default=True),
        dtype=str(cfg.get("torch_dtype", "dtype", default="float32")),
        hidden_dropout=cfg.fraction("resid_pdrop", default=0.1),
        attention_dropout=cfg.fraction("attn_pdrop", default=0.1),
        norm="layernorm", norm_bias=True, learned_positions=True,
        attention=AttentionSpec(num_heads=heads, num_kv_heads=heads, head_dim=d, v_head_dim=d,
                                qkv_bias=True, o_bias=True),
        mlp=MlpSpec(intermediate_size=cfg.int("n_inner", default=4 * hidden), gated=False,
                    activation=cfg.text("activation_function", default="gelu_new"), bias=True),
    )


def _nemotron(cfg: ConfigReader, name: str) -> ModelArch:
    """Nemotron-4: LayerNorm1P (weight and bias), squared-ReLU MLP without a gate, GQA,
    untied embeddings (Nemotron-4 340B report, Sec. 2; HF modeling_nemotron)."""
    hidden = cfg.int("hidden_size")
    bias = cfg.bool("attention_bias", default=False)
    return ModelArch(
        **_common(cfg, name, tie_default=False),
        norm="layernorm", norm_bias=True, learned_positions=False,
        attention=_gqa_attention(cfg, hidden, qkv_bias=bias, o_bias=bias),
        mlp=MlpSpec(intermediate_size=cfg.int("intermediate_size"), gated=False,
                    activation=cfg.text("hidden_act", default="relu2"),
                    bias=cfg.bool("mlp_bias", default=False)),
    )


def _with_moe(arch: ModelArch, moe: MoeSpec, layers: tuple[int, ...],
              cfg: ConfigReader) -> ModelArch:
    if moe.experts_per_token > moe.num_experts:
        raise InputError(f"{cfg.origin}: num_experts_per_tok {moe.experts_per_token} exceeds "
                         f"the {moe.num_experts} experts")
    return replace(arch, moe=moe, moe_layers=layers)


FAMILIES: dict[str, Callable[[ConfigReader, str], ModelArch]] = {
    "llama": _llama_like,
    "mistral": _llama_like,
    "qwen2": lambda cfg, name: _llama_like(cfg, name, qkv_bias=True, o_bias=False),
    "qwen3": lambda cfg, name: _llama_like(cfg, name, qk_norm=True),
    "mixtral": _mixtral,
    "qwen2_moe": lambda cfg, name: _qwen_moe(cfg, name, qk_norm=False),
    "qwen3_moe": lambda cfg, name: _qwen_moe(cfg, name, qk_norm=True),
    "deepseek_v3": _deepseek_v3,
    "gpt2": _gpt2,
    "nemotron": _nemotron,
}


def arch_from_config(raw: Mapping[str, Any], *, name: str, origin: str) -> ModelArch:
    """The architecture of a config dict; an unknown model_type lists the families."""
    if not isinstance(raw, Mapping):
        raise InputError(f"{origin}: expected a JSON object with a model_type")
    model_type = raw.get("model_type")
    if model_type not in FAMILIES:
        raise InputError(
            f"{origin}: unsupported model_type {model_type!r}; supported families: "
            f"{', '.join(sorted(FAMILIES))}",
            fix="use a config.json of a supported family")
    return FAMILIES[model_type](ConfigReader(raw, origin), name)
