"""GPT-lineage decoders: LayerNorm, a plain (not gated) MLP, biases on most linears.

GPT-2/GPT-3, GPT-J, GPT-NeoX (Pythia), OPT, BLOOM, MPT, GPT-BigCode (StarCoder), Falcon
and StarCoder2. They differ in where the position information comes from (a learned table,
rotary, ALiBi), which linears carry a bias, how many norms a layer has and how many
key/value heads attention keeps. Keys and defaults follow each family's `transformers`
configuration class and modeling file; tests/models/test_against_transformers.py checks
every branch against real `transformers` models.
"""

from __future__ import annotations

from infraplan.errors import InputError
from infraplan.models.arch import AttentionSpec, MlpSpec, ModelArch
from infraplan.models.config_reader import ConfigReader, check_kv_heads


def _decoder(cfg: ConfigReader, name: str, *, hidden: int, heads: int, kv_heads: int,
             layers: int, ffn: int, activation: str, qkv_bias: bool, o_bias: bool,
             mlp_bias: bool, max_positions: int, tie_default: bool,
             norm_bias: bool = True, learned_positions: bool = False,
             dtype_default: str = "float32", hidden_dropout: float = 0.0,
             attention_dropout: float = 0.0, sliding_window: int | None = None,
             **extra) -> ModelArch:
    if hidden % heads:
        raise InputError(f"{cfg.origin}: hidden size {hidden} is not divisible by the "
                         f"{heads} attention heads")
    if heads % kv_heads:
        check_kv_heads(cfg, heads, kv_heads, key=next(
            (k for k in ("num_key_value_heads", "num_kv_heads", "n_head_kv", "kv_n_heads")
             if k in cfg.raw), "num_key_value_heads"))
    d = hidden // heads
    return ModelArch(
        name=name, family=cfg.get("model_type"), hidden_size=hidden, num_layers=layers,
        vocab_size=cfg.int("vocab_size"), max_position_embeddings=max_positions,
        tie_word_embeddings=cfg.bool("tie_word_embeddings", default=tie_default),
        dtype=str(cfg.get("torch_dtype", "dtype", default=dtype_default)),
        hidden_dropout=hidden_dropout, attention_dropout=attention_dropout,
        norm="layernorm", norm_bias=norm_bias, learned_positions=learned_positions,
        attention=AttentionSpec(num_heads=heads, num_kv_heads=kv_heads, head_dim=d,
                                v_head_dim=d, qkv_bias=qkv_bias, o_bias=o_bias,
                                sliding_window=sliding_window),
        mlp=MlpSpec(intermediate_size=ffn, gated=False, activation=activation,
                    bias=mlp_bias),
        **extra)


def gpt2(cfg: ConfigReader, name: str) -> ModelArch:
    """GPT-2 / GPT-3 / Megatron GPT: learned positions, biased linears everywhere, GeLU MLP
    of width n_inner (default 4h), tied LM head."""
    hidden = cfg.int("n_embd", "hidden_size")
    heads = cfg.int("n_head", "num_attention_heads")
    return _decoder(
        cfg, name, hidden=hidden, heads=heads, kv_heads=heads,
        layers=cfg.int("n_layer", "num_hidden_layers"),
        ffn=cfg.int("n_inner", default=4 * hidden),
        activation=cfg.text("activation_function", default="gelu_new"),
        qkv_bias=True, o_bias=True, mlp_bias=True, learned_positions=True,
        max_positions=cfg.int("n_positions", "max_position_embeddings", default=1024),
        tie_default=True, hidden_dropout=cfg.fraction("resid_pdrop", default=0.1),
        attention_dropout=cfg.fraction("attn_pdrop", default=0.1))


def gptj(cfg: ConfigReader, name: str) -> ModelArch:
    """GPT-J: attention and MLP in parallel off one LayerNorm, rotary, unbiased attention
    projections, biased MLP, an untied LM head with a bias."""
    hidden = cfg.int("n_embd")
    heads = cfg.int("n_head")
    return _decoder(
        cfg, name, hidden=hidden, heads=heads, kv_heads=heads, layers=cfg.int("n_layer"),
        ffn=cfg.int("n_inner", default=4 * hidden),
        activation=cfg.text("activation_function", default="gelu_new"),
        qkv_bias=False, o_bias=False, mlp_bias=True,
        max_positions=cfg.int("n_positions", default=2048), tie_default=False,
        hidden_dropout=cfg.fraction("resid_pdrop", default=0.0), norms_per_layer=1,
        lm_head_bias=True, parallel_residual=True)


def gpt_neox(cfg: ConfigReader, name: str) -> ModelArch:
    """GPT-NeoX / Pythia: rotary on part of each head, two LayerNorms per layer (also with
    the parallel residual), biases on every linear, untied output embedding."""
    heads = cfg.int("num_attention_heads")
    bias = cfg.bool("attention_bias", default=True)
    return _decoder(
        cfg, name, hidden=cfg.int("hidden_size"), heads=heads, kv_heads=heads,
        layers=cfg.int("num_hidden_layers"), ffn=cfg.int("intermediate_size"),
        activation=cfg.text("hidden_act", default="gelu"), qkv_bias=bias, o_bias=bias,
        mlp_bias=True, max_positions=cfg.int("max_position_embeddings", default=2048),
        tie_default=False, dtype_default="float16",
        parallel_residual=cfg.bool("use_parallel_residual", default=True))


def opt(cfg: ConfigReader, name: str) -> ModelArch:
    """OPT: learned positions with 2 reserved rows (OPTLearnedPositionalEmbedding's
    offset), pre-LayerNorm, ReLU MLP of width ffn_dim, biases by `enable_bias`."""
    hidden = cfg.int("hidden_size")
    if cfg.int("word_embed_proj_dim", default=hidden) != hidden:
        raise InputError(f"{cfg.origin}: word_embed_proj_dim differs from hidden_size "
                         "(OPT-350m's projected embeddings) is not supported",
                         fix="use an OPT config whose word_embed_proj_dim equals hidden_size")
    if not cfg.bool("do_layer_norm_before", default=True) or \
            not cfg.bool("layer_norm_elementwise_affine", default=True):
        raise InputError(f"{cfg.origin}: post-LayerNorm or affine-free OPT variants are not "
                         "supported", fix="use a pre-LayerNorm OPT config (OPT-125m, 1.3b+)")
    heads = cfg.int("num_attention_heads")
    bias = cfg.bool("enable_bias", default=True)
    return _decoder(
        cfg, name, hidden=hidden, heads=heads, kv_heads=heads,
        layers=cfg.int("num_hidden_layers"), ffn=cfg.int("ffn_dim"),
        activation=cfg.text("activation_function", default="relu"), qkv_bias=bias,
        o_bias=bias, mlp_bias=bias, learned_positions=True, position_offset=2,
        max_positions=cfg.int("max_position_embeddings", default=2048), tie_default=True,
        dtype_default="float16", hidden_dropout=cfg.fraction("dropout", default=0.1))


def bloom(cfg: ConfigReader, name: str) -> ModelArch:
    """BLOOM: ALiBi instead of position embeddings, a LayerNorm right after the token
    embedding, biases everywhere, GeLU MLP of 4h, tied LM head."""
    hidden = cfg.int("hidden_size", "n_embed")
    heads = cfg.int("n_head", "num_attention_heads")
    return _decoder(
        cfg, name, hidden=hidden, heads=heads, kv_heads=heads,
        layers=cfg.int("n_layer", "num_hidden_layers"), ffn=4 * hidden, activation="gelu",
        qkv_bias=True, o_bias=True, mlp_bias=True,
        max_positions=cfg.int("seq_length", "max_position_embeddings", default=2048),
        tie_default=True, dtype_default="bfloat16", embedding_norm=True)


def mpt(cfg: ConfigReader, name: str) -> ModelArch:
    """MPT: ALiBi, no biases anywhere when `no_bias` (the default; the LayerNorms too),
    GeLU MLP of expansion_ratio x d_model, tied LM head. Both keys as llm-foundry reads
    them (transformers' port fixes 4 x d_model and no biases; released MPT checkpoints
    use exactly those values)."""
    hidden = cfg.int("d_model")
    heads = cfg.int("n_heads")
    bias = not cfg.bool("no_bias", default=True)
    return _decoder(
        cfg, name, hidden=hidden, heads=heads, kv_heads=heads, layers=cfg.int("n_layers"),
        ffn=cfg.int("expansion_ratio", default=4) * hidden, activation="gelu",
        qkv_bias=bias, o_bias=bias, mlp_bias=bias, norm_bias=bias,
        max_positions=cfg.int("max_seq_len", default=2048), tie_default=True,
        dtype_default="bfloat16")


def gpt_bigcode(cfg: ConfigReader, name: str) -> ModelArch:
    """GPT-BigCode (StarCoder, SantaCoder): GPT-2 with multi-query attention (one key/value
    head when `multi_query`, the default)."""
    hidden = cfg.int("n_embd")
    heads = cfg.int("n_head")
    return _decoder(
        cfg, name, hidden=hidden, heads=heads,
        kv_heads=1 if cfg.bool("multi_query", default=True) else heads,
        layers=cfg.int("n_layer"), ffn=cfg.int("n_inner", default=4 * hidden),
        activation=cfg.text("activation_function", default="gelu_pytorch_tanh"),
        qkv_bias=True, o_bias=True, mlp_bias=True, learned_positions=True,
        max_positions=cfg.int("n_positions", default=1024), tie_default=True,
        hidden_dropout=cfg.fraction("resid_pdrop", default=0.1),
        attention_dropout=cfg.fraction("attn_pdrop", default=0.1))


def falcon(cfg: ConfigReader, name: str) -> ModelArch:
    """Falcon: rotary (or ALiBi), linears biased by `bias` (default none). Falcon-7B: one
    shared key/value head (`multi_query`) and attention parallel to the MLP off a single
    LayerNorm; Falcon-40B/180B (`new_decoder_architecture`): num_kv_heads key/value heads
    and one LayerNorm for each branch."""
    heads = cfg.int("num_attention_heads", "n_head")
    new_arch = cfg.bool("new_decoder_architecture", default=False)
    grouped = new_arch or not cfg.bool("multi_query", default=True)
    kv_heads = cfg.int("num_kv_heads", "n_head_kv", default=heads) if grouped else 1
    parallel = cfg.bool("parallel_attn", default=True)
    # a sequential layer has two norms; a parallel one shares one unless it asks for two
    shared_norm = parallel and cfg.int("num_ln_in_parallel_attn",
                                       default=2 if new_arch else 1) != 2
    norms = 1 if shared_norm else 2
    hidden = cfg.int("hidden_size")
    bias = cfg.bool("bias", default=False)
    return _decoder(
        cfg, name, hidden=hidden, heads=heads, kv_heads=kv_heads,
        layers=cfg.int("num_hidden_layers", "n_layer"),
        ffn=cfg.int("ffn_hidden_size", default=4 * hidden),
        activation=cfg.text("activation", default="gelu"), qkv_bias=bias, o_bias=bias,
        mlp_bias=bias, max_positions=cfg.int("max_position_embeddings", default=2048),
        tie_default=True, dtype_default="bfloat16", norms_per_layer=norms,
        parallel_residual=parallel)


def starcoder2(cfg: ConfigReader, name: str) -> ModelArch:
    """StarCoder2: grouped-query attention with rotary, LayerNorm, a plain GeLU MLP, every
    linear biased by `use_bias` (default true), tied LM head."""
    heads = cfg.int("num_attention_heads")
    bias = cfg.bool("use_bias", default=True)
    return _decoder(
        cfg, name, hidden=cfg.int("hidden_size"), heads=heads,
        kv_heads=cfg.int("num_key_value_heads", default=heads),
        layers=cfg.int("num_hidden_layers"), ffn=cfg.int("intermediate_size"),
        activation=cfg.text("hidden_act", default="gelu_pytorch_tanh"), qkv_bias=bias,
        o_bias=bias, mlp_bias=bias, sliding_window=cfg.optional_int("sliding_window"),
        max_positions=cfg.int("max_position_embeddings", default=4096), tie_default=True,
        dtype_default="bfloat16")
