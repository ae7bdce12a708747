"""Typed reading of a Hugging Face `config.json`: a missing key takes the default that
`transformers` would use (models/hf_defaults.py), or is an error where that default cannot
fit the config; a bad key is an error naming the file, the key and the fix; and the pieces
every family shares (head width, grouped-query attention, the common fields)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from infraplan.errors import InputError
from infraplan.models.arch import AttentionSpec, MlpSpec, ModelArch, MoeSpec

_REQUIRED = object()
# the largest size a config may give (a width, a vocabulary, a count): int32's limit, as in
# the checkpoints' tensor shapes; it keeps every FLOP and byte product finite in float64
MAX_CONFIG_INT = 2**31 - 1


class ConfigReader:
    """Typed access to a config dict; errors name the file, the key and the fix."""

    def __init__(self, raw: Mapping[str, Any], origin: str,
                 defaults: Mapping[str, Any] | None = None):
        """`defaults`: the family's `transformers` defaults for keys the file leaves out (a
        key written as null keeps the reader's own fallback, as it does in transformers)."""
        self.raw, self.origin, self.defaults = raw, origin, dict(defaults or {})

    def given(self, *keys: str) -> bool:
        """Whether the file itself sets one of `keys`."""
        return any(self.raw.get(key) is not None for key in keys)

    def get(self, *keys: str, default: Any = _REQUIRED) -> Any:
        for key in keys:
            if self.raw.get(key) is not None:
                return self.raw[key]
        if not any(key in self.raw for key in keys) and keys[0] in self.defaults:
            return self.defaults[keys[0]]
        if default is _REQUIRED:
            raise InputError(f"{self.origin}: missing {keys[0]!r}",
                             fix=f"add \"{keys[0]}\" to the config (model_type "
                                 f"{self.raw.get('model_type')!r} needs it)")
        return default

    def int(self, *keys: str, default: Any = _REQUIRED, minimum: int = 1) -> int:
        value = self.get(*keys, default=default)
        if isinstance(value, bool) or not isinstance(value, int) or \
                not minimum <= value <= MAX_CONFIG_INT:
            raise InputError(f"{self.origin}: {keys[0]} must be a whole number from {minimum} "
                             f"to {MAX_CONFIG_INT:,}, got {_shown(value)}",
                             fix=f"set \"{keys[0]}\" to the model's real size")
        return value

    def bool(self, *keys: str, default: Any = _REQUIRED) -> bool:
        value = self.get(*keys, default=default)
        if not isinstance(value, bool):
            hint = f"write {value.lower()} without quotes" \
                if isinstance(value, str) and value.lower() in ("true", "false") else \
                "write true or false (JSON booleans, without quotes)"
            raise InputError(f"{self.origin}: {keys[0]} must be true or false, got {value!r}",
                             fix=f"{hint}: \"{keys[0]}\": "
                                 f"{'false' if str(value).lower() == 'false' else 'true'}")
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
        if not isinstance(value, list) or any(
                isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_CONFIG_INT
                for v in value):
            raise InputError(f"{self.origin}: {keys[0]} must be a list of layer indices "
                             f"(whole numbers from 0 to {MAX_CONFIG_INT:,}), got "
                             f"{_shown(value)}")
        return value


def _shown(value: Any) -> str:
    """repr of a config value, cut short: a 400-digit integer is not worth echoing whole."""
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:40]}... ({len(text):,} characters)"


def head_dim(cfg: ConfigReader, hidden: int, heads: int) -> int:
    explicit = cfg.get("head_dim", default=None)
    if explicit is not None:
        return cfg.int("head_dim")
    if hidden % heads:
        raise InputError(f"{cfg.origin}: hidden_size {hidden} is not divisible by "
                         f"num_attention_heads {heads}", fix="set head_dim explicitly")
    return hidden // heads


def divisors(n: int) -> str:
    """'1, 2, 4, 8': the key/value head counts (or expert groups) that divide n."""
    found = [d for d in range(1, min(n, 10**6) + 1) if n % d == 0]
    return ", ".join(map(str, found[:12])) + (", ..." if len(found) > 12 else "")


def check_kv_heads(cfg: ConfigReader, heads: int, kv_heads: int,
                   key: str = "num_key_value_heads") -> None:
    """Grouped-query attention shares each key/value head among heads / kv_heads query
    heads: the count must divide the heads. A count the file leaves out is the family's
    transformers default (Gemma's 16), which may not fit a smaller model: then it is asked
    for."""
    if not heads % kv_heads:
        return
    fix = f"set \"{key}\" to a divisor of num_attention_heads {heads}: {divisors(heads)}"
    if not cfg.given(key):
        raise InputError(f"{cfg.origin}: missing {key!r}; transformers' default for "
                         f"{cfg.raw.get('model_type')!r} ({kv_heads}) does not divide the "
                         f"{heads} attention heads", fix=fix)
    raise InputError(f"{cfg.origin}: {key} {kv_heads} must divide num_attention_heads "
                     f"{heads}", fix=fix)


def gqa_attention(cfg: ConfigReader, hidden: int, *, qkv_bias: bool, o_bias: bool,
                   qk_norm: bool = False) -> AttentionSpec:
    heads = cfg.int("num_attention_heads")
    kv_heads = cfg.int("num_key_value_heads", default=heads)
    check_kv_heads(cfg, heads, kv_heads)
    d = head_dim(cfg, hidden, heads)
    window = cfg.optional_int("sliding_window")
    if not cfg.bool("use_sliding_window", default=window is not None):
        window = None
    return AttentionSpec(num_heads=heads, num_kv_heads=kv_heads, head_dim=d, v_head_dim=d,
                         qkv_bias=qkv_bias, o_bias=o_bias, qk_norm=qk_norm,
                         sliding_window=window)


def common_fields(cfg: ConfigReader, name: str, *, tie_default: bool, **extra: Any) -> dict:
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


def with_moe(arch: ModelArch, moe: MoeSpec, layers: tuple[int, ...],
             cfg: ConfigReader) -> ModelArch:
    """`arch` with the MoE block `moe` on `layers`."""
    if moe.experts_per_token > moe.num_experts:
        raise InputError(f"{cfg.origin}: num_experts_per_tok {moe.experts_per_token} exceeds "
                         f"the {moe.num_experts} experts")
    return replace(arch, moe=moe, moe_layers=layers)


def group_limited_moe(cfg: ConfigReader, *, routed: bool = True) -> MoeSpec:
    """DeepSeek-V3's MoE block as its config keys describe it (report Sec. 2.1.2; the
    models that copy the block read the same keys): `n_routed_experts` SwiGLU experts of
    `moe_intermediate_size`, one shared MLP `n_shared_experts` times as wide, and
    `num_experts_per_tok` experts per token drawn from `topk_group` of `n_group` groups.
    `routed`: some layer routes (with every layer dense, the groups are not checked)."""
    act = cfg.text("hidden_act", default="silu")
    expert = MlpSpec(intermediate_size=cfg.int("moe_intermediate_size"), gated=True,
                     activation=act)
    n_shared = cfg.int("n_shared_experts", minimum=0)  # the families' defaults: hf_defaults
    shared = MlpSpec(intermediate_size=expert.intermediate_size * n_shared, gated=True,
                     activation=act) if n_shared else None
    experts = cfg.int("n_routed_experts", "num_local_experts")
    groups = cfg.int("n_group", default=1)
    picked = cfg.int("topk_group", default=groups)
    if routed and (experts % groups or picked > groups):  # groups matter where it routes
        missing = [k for k in ("n_group", "topk_group") if not cfg.given(k)]
        what = f"missing {' and '.join(map(repr, missing))}, whose transformers default " \
            f"for {cfg.raw.get('model_type')!r} does not fit: " if missing else ""
        raise InputError(f"{cfg.origin}: {what}n_group={groups} must divide n_routed_experts="
                         f"{experts} and be >= topk_group={picked}",
                         fix=f"set \"n_group\" to a divisor of {experts} "
                             f"({divisors(experts)}) and \"topk_group\" to at most n_group "
                             "(1 and 1 if the model does not route by group)")
    return MoeSpec(num_experts=experts, experts_per_token=cfg.int("num_experts_per_tok"),
                   expert=expert, shared=shared, expert_groups=groups, groups_per_token=picked)
