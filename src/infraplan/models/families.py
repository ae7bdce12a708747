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

from infraplan.errors import InputError, close_matches
from infraplan.models.arch import AttentionSpec, MlpSpec, ModelArch, MoeSpec, Tower
from infraplan.models.stored import stored_weights, unmodelled_quantization
from infraplan.models import families_gpt as gpt
from infraplan.models import families_recent as recent
from infraplan.models import families_variants as var
from infraplan.models.config_reader import (ConfigReader, common_fields, gqa_attention,
                                            group_limited_moe, with_moe)
from infraplan.models.hf_defaults import TRANSFORMERS_DEFAULTS


def _qwen2(cfg: ConfigReader, name: str) -> ModelArch:
    """Qwen2: q, k, v biased; with use_sliding_window, layers from max_window_layers on
    attend within the window (transformers' Qwen2Config)."""
    arch = var.llama_like(cfg, name, qkv_bias=True, o_bias=False)
    first = cfg.int("max_window_layers", default=28, minimum=0)
    return var.with_window(arch, cfg, lambda n: max(n - first, 0))


def _mixtral(cfg: ConfigReader, name: str) -> ModelArch:
    dense = var.llama_like(cfg, name)
    expert = dense.mlp  # each Mixtral expert is a full SwiGLU MLP of intermediate_size
    moe = MoeSpec(num_experts=cfg.int("num_local_experts"),
                  experts_per_token=cfg.int("num_experts_per_tok", default=2), expert=expert)
    return with_moe(dense, moe, tuple(range(dense.num_layers)), cfg)


def _qwen_moe(cfg: ConfigReader, name: str, *, qk_norm: bool) -> ModelArch:
    """qwen2_moe / qwen3_moe: MoE on layers (i+1) % decoder_sparse_step == 0, except
    mlp_only_layers; qwen2_moe adds a gated shared expert."""
    if qk_norm:  # qwen3_moe: biases follow attention_bias
        dense = var.llama_like(cfg, name, qk_norm=True)
    else:  # qwen2_moe: q, k, v biased by `qkv_bias` (default true), o never
        dense = var.llama_like(cfg, name, qkv_bias=cfg.bool("qkv_bias", default=True),
                            o_bias=False)
    act = cfg.text("hidden_act", default="silu")
    expert = MlpSpec(intermediate_size=cfg.int("moe_intermediate_size"), gated=True,
                     activation=act)
    # required: Qwen2MoeConfig's default (5632) is Qwen1.5-MoE-A2.7B's width, and
    # transformers always builds the shared expert (qwen3_moe has none)
    shared_width = 0 if qk_norm else cfg.int("shared_expert_intermediate_size", minimum=0)
    shared = MlpSpec(intermediate_size=shared_width, gated=True, activation=act) \
        if shared_width else None
    moe = MoeSpec(num_experts=cfg.int("num_experts"),
                  experts_per_token=cfg.int("num_experts_per_tok"), expert=expert,
                  shared=shared, shared_gate=shared is not None)
    step = cfg.int("decoder_sparse_step", default=1)
    dense_only = set(cfg.int_list("mlp_only_layers"))
    layers = tuple(i for i in range(dense.num_layers)
                   if i not in dense_only and (i + 1) % step == 0)
    return with_moe(dense, moe, layers, cfg)


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
    first_dense = cfg.int("first_k_dense_replace", default=0, minimum=0)
    freq = cfg.int("moe_layer_freq", default=1)
    num_layers = cfg.int("num_hidden_layers")
    layers = tuple(i for i in range(num_layers) if i >= first_dense and i % freq == 0)
    moe = group_limited_moe(cfg, routed=bool(layers))
    arch = ModelArch(
        **common_fields(cfg, name, tie_default=False,
                  mtp_layers=cfg.int("num_nextn_predict_layers", default=0, minimum=0)),
        norm="rmsnorm", norm_bias=False, learned_positions=False, attention=attention,
        mlp=MlpSpec(intermediate_size=cfg.int("intermediate_size"), gated=True,
                    activation=act),
    )
    return with_moe(arch, moe, layers, cfg)


def _nemotron(cfg: ConfigReader, name: str) -> ModelArch:
    """Nemotron-4: LayerNorm1P (weight and bias), squared-ReLU MLP without a gate, GQA,
    untied embeddings (Nemotron-4 340B report, Sec. 2; HF modeling_nemotron)."""
    hidden = cfg.int("hidden_size")
    bias = cfg.bool("attention_bias", default=False)
    return ModelArch(
        **common_fields(cfg, name, tie_default=False),
        norm="layernorm", norm_bias=True, learned_positions=False,
        attention=gqa_attention(cfg, hidden, qkv_bias=bias, o_bias=bias),
        mlp=MlpSpec(intermediate_size=cfg.int("intermediate_size"), gated=False,
                    activation=cfg.text("hidden_act", default="relu2"),
                    bias=cfg.bool("mlp_bias", default=False)),
    )


FAMILIES: dict[str, Callable[[ConfigReader, str], ModelArch]] = {
    "llama": var.llama_like,
    "mistral": var.llama_like,
    "qwen2": _qwen2,
    "qwen3": lambda cfg, name: var.llama_like(cfg, name, qk_norm=True),
    "mixtral": _mixtral,
    "qwen2_moe": lambda cfg, name: _qwen_moe(cfg, name, qk_norm=False),
    "qwen3_moe": lambda cfg, name: _qwen_moe(cfg, name, qk_norm=True),
    "deepseek_v3": _deepseek_v3,
    "deepseek_v2": _deepseek_v3,  # same MLA and DeepSeekMoE keys (DeepSeek-V2 Sec. 2)
    # Kimi K2's config.json: model_type kimi_k2 with DeepSeek-V3's layout and keys; transformers
    # has no kimi_k2 class, the shapes are models/deepseek_v3/modeling_deepseek_v3.py's
    "kimi_k2": _deepseek_v3,
    "nemotron": _nemotron,
    # Phi-3 fuses q/k/v and gate/up into single linears of the same total shape
    "phi3": var.llama_like,
    # Gemma: GeGLU, head_dim 256 in the config, tied embeddings
    "gemma": lambda cfg, name: var.llama_like(cfg, name, tie_default=True,
                                           act_default="gelu_pytorch_tanh"),
    "granite": var.llama_like,  # Llama shapes; its multipliers scale, they add no weights
    "granitemoe": _mixtral,
    "gemma2": var.gemma2,
    "gemma3_text": var.gemma3,
    "olmo": var.olmo,
    "olmo2": var.olmo2,
    "olmo3": var.olmo3,
    "olmoe": var.olmoe,
    "cohere": var.cohere,
    "cohere2": var.cohere2,
    "exaone4": var.exaone4,
    "stablelm": var.stablelm,
    "phi": var.phi,
    "gpt_oss": var.gpt_oss,
    "llama4_text": var.llama4,
    "gpt2": gpt.gpt2,
    "gptj": gpt.gptj,
    "gpt_neox": gpt.gpt_neox,
    "opt": gpt.opt,
    "bloom": gpt.bloom,
    "mpt": gpt.mpt,
    "gpt_bigcode": gpt.gpt_bigcode,
    "falcon": gpt.falcon,
    "starcoder2": gpt.starcoder2,
    "glm": recent.glm,
    "glm4": recent.glm4,
    "glm4_moe": recent.glm4_moe,
    "dots1": recent.dots1,
    "phimoe": recent.phimoe,
    "dbrx": recent.dbrx,
    "ernie4_5": recent.ernie4_5,
    "ernie4_5_moe": recent.ernie4_5_moe,
    "seed_oss": recent.seed_oss,
    "smollm3": recent.smollm3,
    "hunyuan_v1_dense": recent.hunyuan_dense,
    "hunyuan_v1_moe": recent.hunyuan_moe,
    "arcee": recent.arcee,
}


def _known(model_type: Any) -> bool:
    return isinstance(model_type, str) and model_type in FAMILIES  # [] or {}: unhashable


# Hugging Face names a model class <Family><Head> (LlamaForCausalLM, GPT2LMHeadModel)
_CLASS_HEADS = ("ForCausalLM", "LMHeadModel", "ForConditionalGeneration", "Model")


def _family_of_class(raw: Mapping[str, Any]) -> str | None:
    """The family that the first class in `architectures` names, for a config without a
    model_type (older and hand-written ones): 'GPTNeoXForCausalLM' is gpt_neox."""
    classes = raw.get("architectures")
    if not (isinstance(classes, list) and classes and isinstance(classes[0], str)):
        return None
    stem = next((classes[0][:-len(h)] for h in _CLASS_HEADS if classes[0].endswith(h)),
                classes[0]).lower()
    matches = [family for family in FAMILIES if family.replace("_", "") == stem]
    return matches[0] if len(matches) == 1 else None


def _positive_int(raw: Mapping[str, Any], *keys: str) -> int | None:
    value = next((raw[k] for k in keys if raw.get(k) is not None), None)
    ok = isinstance(value, int) and not isinstance(value, bool) and 0 < value < 2**31
    return value if ok else None


def _towers(raw: Mapping[str, Any]) -> tuple[Tower, ...]:
    """The encoders beside `text_config` (vision_config, audio_config), each with an estimate
    of its parameters: a ViT encoder layer holds Q, K, V and O (4h^2) and a two-matrix MLP
    (2hf, f = 4h when the config gives no width); biases, norms, the patch embedding and the
    projector into the language model add a few percent, and a gated MLP (Pixtral) a third
    matrix, so the estimate is a floor."""
    towers = []
    for key, sub in raw.items():
        if key == "text_config" or not key.endswith("_config") or not isinstance(sub, Mapping):
            continue
        layers = _positive_int(sub, "num_hidden_layers", "depth", "num_layers")
        hidden = _positive_int(sub, "hidden_size", "embed_dim", "d_model", "width")
        ffn = _positive_int(sub, "intermediate_size", "encoder_ffn_dim") or \
            (4 * hidden if hidden else None)
        estimate = layers * (4 * hidden**2 + 2 * hidden * ffn) if layers and hidden else None
        model_type = sub.get("model_type")
        if layers is None and not isinstance(model_type, str):
            continue  # not an encoder (a quantization_config, say)
        towers.append(Tower(kind=key.removesuffix("_config"),
                            model_type=model_type if isinstance(model_type, str) else "",
                            layers=layers, hidden_size=hidden, params_estimate=estimate))
    return tuple(towers)


def arch_from_config(raw: Mapping[str, Any], *, name: str, origin: str) -> ModelArch:
    """The architecture of a config dict; an unknown model_type lists the families."""
    arch = _language_model(raw, name=name, origin=origin)
    if not raw.get("quantization_config"):
        return arch
    return replace(arch, stored=stored_weights(raw),
                   unmodelled_quantization=unmodelled_quantization(raw))


def _language_model(raw: Mapping[str, Any], *, name: str, origin: str) -> ModelArch:
    if not isinstance(raw, Mapping):
        raise InputError(f"{origin}: expected a JSON object with a model_type")
    if raw.get("model_type") is None and (family := _family_of_class(raw)) is not None:
        raw = {**raw, "model_type": family}
    model_type = raw.get("model_type")
    text = raw.get("text_config")
    if not _known(model_type) and isinstance(text, Mapping) and _known(text.get("model_type")):
        # a multimodal checkpoint (Gemma 3, Llama 4, Mistral 3): plan its language model;
        # its vision (or audio) tower is reported with an estimate of its size, not counted
        language = FAMILIES[text["model_type"]](_reader(text, f"{origin} text_config"), name)
        return replace(language, towers=_towers(raw))
    if not _known(model_type):
        what = f"unsupported model_type {model_type!r}" if model_type is not None else \
            "no model_type" + (f", and its architectures {raw['architectures']!r} name no "
                               "supported family" if raw.get("architectures") else "")
        near = close_matches(model_type, FAMILIES) if isinstance(model_type, str) else []
        if near:
            raise InputError(f"{origin}: {what}; did you mean "
                             f"{', '.join(map(repr, near))}?",
                             fix=f"set \"model_type\" to {near[0]!r} if that is its family "
                                 f"(supported: {', '.join(sorted(FAMILIES))})")
        raise InputError(f"{origin}: {what}; supported families: "
                         f"{', '.join(sorted(FAMILIES))}",
                         fix="use a config.json of a supported family"
                             + ("" if model_type is not None else
                                ', or add "model_type" naming its family'))
    return FAMILIES[model_type](_reader(raw, origin), name)


def _reader(raw: Mapping[str, Any], origin: str) -> ConfigReader:
    """A reader of `raw` that fills the keys it leaves out as its family's transformers
    configuration class would."""
    return ConfigReader(raw, origin, TRANSFORMERS_DEFAULTS.get(raw["model_type"]))
