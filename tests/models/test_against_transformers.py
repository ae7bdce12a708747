"""Parameter counts and KV-cache sizes against real `transformers` models (random weights,
small dims, on the CPU). One tiny config per supported family exercises every branch of
the family's config reader: biases, tied embeddings, MoE layer patterns, MLA."""

from __future__ import annotations

import pytest

from infraplan.models import kv_cache_bytes, param_counts
from infraplan.models.families import arch_from_config
from tests.conftest import require

torch = require("torch")
transformers = require("transformers")

BASE = dict(hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
            num_key_value_heads=2, vocab_size=101, max_position_embeddings=128)
BASE_NO_KV = {key: value for key, value in BASE.items() if key != "num_key_value_heads"}

TINY = {
    "llama-gqa": dict(BASE, model_type="llama"),
    "llama-biases-tied": dict(BASE, model_type="llama", attention_bias=True, mlp_bias=True,
                              tie_word_embeddings=True),
    "llama-mqa-headdim": dict(BASE, model_type="llama", num_key_value_heads=1, head_dim=24),
    "mistral": dict(BASE, model_type="mistral", sliding_window=16),
    "qwen2": dict(BASE, model_type="qwen2", tie_word_embeddings=True),
    "qwen3": dict(BASE, model_type="qwen3", head_dim=32),
    "mixtral": dict(BASE, model_type="mixtral", num_local_experts=4, num_experts_per_tok=2),
    "qwen2_moe": dict(BASE, model_type="qwen2_moe", num_experts=6, num_experts_per_tok=2,
                      moe_intermediate_size=32, shared_expert_intermediate_size=80,
                      decoder_sparse_step=1, mlp_only_layers=[1]),
    "qwen3_moe": dict(BASE, model_type="qwen3_moe", num_experts=6, num_experts_per_tok=2,
                      moe_intermediate_size=32, decoder_sparse_step=2, head_dim=16),
    "gpt2": dict(model_type="gpt2", n_embd=64, n_layer=3, n_head=4, vocab_size=101,
                 n_positions=128),
    "gpt2-ninner-untied": dict(model_type="gpt2", n_embd=64, n_layer=2, n_head=4,
                               vocab_size=101, n_positions=64, n_inner=80,
                               tie_word_embeddings=False),
    "nemotron": dict(BASE, model_type="nemotron", hidden_act="relu2", head_dim=16,
                     partial_rotary_factor=0.5),
    "deepseek_v3": dict(BASE, model_type="deepseek_v3", num_hidden_layers=4,
                        num_attention_heads=4, num_key_value_heads=4, q_lora_rank=24,
                        kv_lora_rank=16, qk_nope_head_dim=16, qk_rope_head_dim=8,
                        v_head_dim=12, n_routed_experts=8, num_experts_per_tok=2,
                        moe_intermediate_size=32, n_shared_experts=2, first_k_dense_replace=1,
                        n_group=2, topk_group=1),
    "deepseek_v3-no-qlora": dict(BASE, model_type="deepseek_v3", num_hidden_layers=2,
                                 num_attention_heads=4, num_key_value_heads=4, q_lora_rank=None,
                                 kv_lora_rank=16, qk_nope_head_dim=16, qk_rope_head_dim=8,
                                 v_head_dim=16, n_routed_experts=4, num_experts_per_tok=1,
                                 moe_intermediate_size=20, n_shared_experts=1,
                                 first_k_dense_replace=0, n_group=1, topk_group=1),
    "phi3": dict(BASE, model_type="phi3", pad_token_id=0, eos_token_id=0),
    "gemma-mqa": dict(BASE, model_type="gemma", num_key_value_heads=1, head_dim=16),
    "starcoder2": dict(BASE, model_type="starcoder2"),
    "starcoder2-nobias-untied": dict(BASE, model_type="starcoder2", use_bias=False,
                                     tie_word_embeddings=False),
    "gptj": dict(model_type="gptj", n_embd=64, n_layer=2, n_head=4, vocab_size=101,
                 n_positions=128, rotary_dim=8),
    "gpt_neox": dict(BASE, model_type="gpt_neox"),
    "gpt_neox-nobias-tied": dict(BASE, model_type="gpt_neox", attention_bias=False,
                                 tie_word_embeddings=True),
    "opt": dict(BASE, model_type="opt", ffn_dim=80, word_embed_proj_dim=64),
    "opt-nobias": dict(BASE, model_type="opt", ffn_dim=80, word_embed_proj_dim=64,
                       enable_bias=False),
    "bloom": dict(model_type="bloom", hidden_size=64, n_layer=2, n_head=4, vocab_size=101),
    # transformers' MPT port fixes the MLP at 4h and drops every bias; released MPT
    # checkpoints (expansion_ratio 4, no_bias true) agree with it
    "mpt": dict(model_type="mpt", d_model=64, n_layers=2, n_heads=4, vocab_size=101,
                max_seq_len=128),
    "gpt_bigcode-mqa": dict(model_type="gpt_bigcode", n_embd=64, n_layer=2, n_head=4,
                            vocab_size=101, n_positions=128),
    "gpt_bigcode-mha": dict(model_type="gpt_bigcode", n_embd=64, n_layer=2, n_head=4,
                            vocab_size=101, n_positions=128, multi_query=False, n_inner=80),
    "deepseek_v2-lite-style": dict(BASE, model_type="deepseek_v2", num_key_value_heads=4,
                                   q_lora_rank=None, kv_lora_rank=16, qk_nope_head_dim=16,
                                   qk_rope_head_dim=8, v_head_dim=16, n_routed_experts=8,
                                   num_experts_per_tok=2, moe_intermediate_size=32,
                                   n_shared_experts=2, first_k_dense_replace=1),
    "granite": dict(BASE, model_type="granite", attention_bias=True),
    "granitemoe": dict(BASE, model_type="granitemoe", num_local_experts=4,
                       num_experts_per_tok=2),
    "gemma2": dict(BASE, model_type="gemma2", head_dim=16, sliding_window=8),
    "gemma3_text": dict(BASE, model_type="gemma3_text", head_dim=16, num_hidden_layers=7,
                        sliding_window=8),
    "olmo": dict(BASE, model_type="olmo"),
    "olmo2": dict(BASE, model_type="olmo2"),
    "olmo3": dict(BASE, model_type="olmo3", sliding_window=8),
    "olmoe": dict(BASE, model_type="olmoe", num_experts=6, num_experts_per_tok=2),
    "cohere-qknorm": dict(BASE, model_type="cohere", use_qk_norm=True),
    "cohere2": dict(BASE, model_type="cohere2", num_hidden_layers=5, sliding_window=8),
    "exaone4": dict(BASE, model_type="exaone4", sliding_window=8),
    "stablelm": dict(BASE, model_type="stablelm", use_qkv_bias=True),
    "stablelm-parallel": dict(BASE, model_type="stablelm", use_parallel_residual=True),
    "phi": dict(BASE, model_type="phi"),
    "phi-qk-layernorm": dict(BASE, model_type="phi", qk_layernorm=True),
    "gpt_oss": dict(BASE, model_type="gpt_oss", num_local_experts=4, num_experts_per_tok=2,
                    head_dim=16, sliding_window=8),
    "llama4_text": dict(BASE, model_type="llama4_text", num_local_experts=4,
                        num_experts_per_tok=1, intermediate_size_mlp=80,
                        interleave_moe_layer_step=2, attention_chunk_size=8, head_dim=16),
    "falcon-7b-style": dict(model_type="falcon", hidden_size=64, num_hidden_layers=2,
                            num_attention_heads=4, vocab_size=101),
    "falcon-40b-style": dict(model_type="falcon", hidden_size=64, num_hidden_layers=2,
                             num_attention_heads=4, num_kv_heads=2, vocab_size=101,
                             new_decoder_architecture=True, ffn_hidden_size=80),
    "falcon-sequential-biased": dict(model_type="falcon", hidden_size=64,
                                     num_hidden_layers=2, num_attention_heads=4,
                                     vocab_size=101, parallel_attn=False, multi_query=False,
                                     bias=True, tie_word_embeddings=False),
    # GlmConfig's defaults: biased q/k/v, head_dim 128 (not h / a), 2 key/value heads
    "glm-defaults": dict(BASE_NO_KV, model_type="glm", pad_token_id=0),
    "glm-nobias": dict(BASE, model_type="glm", attention_bias=False, head_dim=16,
                       pad_token_id=0),
    "glm4": dict(BASE, model_type="glm4", head_dim=16, tie_word_embeddings=True,
                 pad_token_id=0),
    "glm4_moe": dict(BASE, model_type="glm4_moe", num_hidden_layers=4, n_routed_experts=8,
                     num_experts_per_tok=2, moe_intermediate_size=32, n_shared_experts=2,
                     first_k_dense_replace=2, n_group=2, topk_group=1, use_qk_norm=True,
                     attention_bias=True, head_dim=16),
    "glm4_moe-defaults": dict(BASE, model_type="glm4_moe", n_routed_experts=4,
                              num_experts_per_tok=2, moe_intermediate_size=32),
    "dots1": dict(BASE, model_type="dots1", num_hidden_layers=4, n_routed_experts=8,
                  num_experts_per_tok=2, moe_intermediate_size=32, n_shared_experts=2,
                  first_k_dense_replace=1, attention_bias=True, sliding_window=8,
                  max_window_layers=2),
    "dots1-nowindow": dict(BASE, model_type="dots1", n_routed_experts=4,
                           num_experts_per_tok=1, moe_intermediate_size=32, n_shared_experts=1),
    "phimoe": dict(BASE, model_type="phimoe", num_local_experts=4, num_experts_per_tok=2),
    "phimoe-biases": dict(BASE, model_type="phimoe", num_local_experts=4,
                          num_experts_per_tok=1, attention_bias=True, lm_head_bias=True),
    # (transformers' DbrxAttention needs attn_config's rope_theta, which has no default,
    # and clip_qkv, whose default None fails in forward; DBRX's config.json sets both)
    "dbrx": dict(model_type="dbrx", d_model=64, n_heads=4, n_layers=2, max_seq_len=128,
                 vocab_size=101, attn_config=dict(kv_n_heads=2, rope_theta=5e5, clip_qkv=8),
                 ffn_config=dict(ffn_hidden_size=48, moe_num_experts=4, moe_top_k=2)),
    # DbrxConfig's defaults: 1 key/value head, 4 experts of width 3584, top-1
    "dbrx-defaults": dict(model_type="dbrx", d_model=64, n_heads=4, n_layers=2,
                          max_seq_len=128, vocab_size=101,
                          attn_config=dict(rope_theta=5e5, clip_qkv=8)),
    # Ernie4_5Config's defaults: head_dim 128, tied embeddings
    "ernie4_5-biases": dict(BASE, model_type="ernie4_5", use_bias=True),
    "ernie4_5-untied": dict(BASE, model_type="ernie4_5", head_dim=16,
                            tie_word_embeddings=False),
    "ernie4_5_moe": dict(BASE, model_type="ernie4_5_moe", num_hidden_layers=5,
                         moe_num_experts=6, moe_k=2, moe_intermediate_size=32,
                         moe_num_shared_experts=2, moe_layer_start_index=1,
                         moe_layer_end_index=3, use_bias=True),
    "ernie4_5_moe-interval": dict(BASE, model_type="ernie4_5_moe", num_hidden_layers=4,
                                  moe_num_experts=4, moe_k=1, moe_intermediate_size=32,
                                  moe_num_shared_experts=0, moe_layer_start_index=0,
                                  moe_layer_interval=2, tie_word_embeddings=False),
    # SeedOssConfig's defaults: biased q/k/v, head_dim 128
    "seed_oss": dict(BASE, model_type="seed_oss", attention_out_bias=True, mlp_bias=True),
    "seed_oss-nobias": dict(BASE, model_type="seed_oss", attention_bias=False, head_dim=16),
    "smollm3": dict(BASE, model_type="smollm3", num_hidden_layers=5, use_sliding_window=True,
                    sliding_window=8, pad_token_id=0),
    "smollm3-untied-biases": dict(BASE, model_type="smollm3", tie_word_embeddings=False,
                                  attention_bias=True, mlp_bias=True, pad_token_id=0),
    "hunyuan_v1_dense": dict(BASE, model_type="hunyuan_v1_dense", attention_bias=True,
                             head_dim=16),
    # (HunYuanMoEV1Config leaves head_dim None and its attention then fails: configs set it)
    "hunyuan_v1_moe": dict(BASE, model_type="hunyuan_v1_moe", num_experts=4,
                           moe_topk=[2, 2, 2], head_dim=16),
    "hunyuan_v1_moe-tied": dict(BASE, model_type="hunyuan_v1_moe", num_experts=4, moe_topk=1,
                                tie_word_embeddings=True, attention_bias=True, head_dim=24),
    "arcee": dict(BASE, model_type="arcee"),
    "arcee-biases": dict(BASE, model_type="arcee", attention_bias=True, mlp_bias=True),
    # transformers has no kimi_k2 class: built as deepseek_v3 (AS_TRANSFORMERS)
    "kimi_k2": dict(BASE, model_type="kimi_k2", num_key_value_heads=4, q_lora_rank=24,
                    kv_lora_rank=16, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16,
                    n_routed_experts=8, num_experts_per_tok=2, moe_intermediate_size=32,
                    n_shared_experts=1, first_k_dense_replace=1, n_group=1, topk_group=1),
}
# the model_type a family's checkpoints are built with in transformers, where it differs
AS_TRANSFORMERS = {"kimi_k2": "deepseek_v3"}


def build(config: dict):
    model_type = AS_TRANSFORMERS.get(config["model_type"], config["model_type"])
    cfg = transformers.AutoConfig.for_model(**dict(config, model_type=model_type))
    torch.manual_seed(0)
    return transformers.AutoModelForCausalLM.from_config(cfg).eval()


def routing(model) -> tuple[int, int]:
    """(experts per token, routed experts) as the built model's config has them (defaults
    filled in; DBRX keeps them in ffn_config, Hunyuan may give moe_topk per layer)."""
    cfg = getattr(model.config, "ffn_config", model.config)

    def first(*names):
        return next((v for v in (getattr(cfg, n, None) for n in names) if v is not None), 1)

    k = first("num_experts_per_tok", "moe_top_k")
    n = first("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")
    return (k[0] if isinstance(k, list) else k), n


def active_params(model) -> int:
    """Count what one token touches: all parameters, with each MoE layer's routed experts
    counted as experts_per_token / num_experts of them."""
    k, n = routing(model)
    total = 0
    for name, p in model.named_parameters():
        routed = ".experts." in name or name.endswith(".experts.gate_up_proj") or \
            name.endswith(".experts.down_proj")
        total += p.numel() * k // n if routed else p.numel()
    return total


@pytest.mark.parametrize("label", list(TINY))
def test_parameter_count_matches_transformers(label):
    config = TINY[label]
    model = build(config)
    expected = sum(p.numel() for p in model.parameters())
    counts = param_counts(arch_from_config(config, name=label, origin=label))
    assert counts.total == expected
    assert counts.active == active_params(model)


@pytest.mark.parametrize("label", ["llama-gqa", "llama-mqa-headdim", "gpt2", "qwen3",
                                   "nemotron", "deepseek_v3", "gemma-mqa", "gptj",
                                   "gpt_neox", "opt", "bloom", "mpt", "gpt_bigcode-mqa",
                                   "falcon-7b-style", "starcoder2", "olmo2", "olmoe",
                                   "cohere-qknorm", "phi", "stablelm",
                                   "deepseek_v2-lite-style", "glm-defaults", "glm4",
                                   "glm4_moe", "dots1-nowindow", "phimoe", "dbrx",
                                   "dbrx-defaults", "ernie4_5-biases", "ernie4_5_moe",
                                   "seed_oss", "smollm3-untied-biases", "hunyuan_v1_dense",
                                   "hunyuan_v1_moe", "arcee", "kimi_k2"])
def test_kv_cache_bytes_match_a_real_cache(label):
    config = TINY[label]
    model = build(config).to(torch.bfloat16)
    seq_len, batch = 13, 2
    ids = torch.randint(0, config["vocab_size"], (batch, seq_len))
    with torch.no_grad():
        cache = model(ids, use_cache=True).past_key_values
    real = 0
    for layer in cache.layers:
        real += layer.keys.numel() * layer.keys.element_size()
        real += layer.values.numel() * layer.values.element_size()
    arch = arch_from_config(config, name=label, origin=label)
    # MLA: transformers 5, like vLLM and SGLang, caches the compressed latent + RoPE key.
    # (Falcon-40B-style grouped key/value heads are left out: transformers caches them
    # repeated to every query head, engines cache the num_kv_heads groups we count.)
    assert kv_cache_bytes(arch, seq_len, "bf16", batch=batch) == real


@pytest.mark.parametrize("label", ["gemma2", "gemma3_text", "olmo3", "cohere2", "exaone4",
                                   "gpt_oss", "llama4_text", "dots1", "smollm3"])
def test_local_layers_match_the_layers_a_real_cache_caps(label):
    """Families that alternate local (sliding-window) and global layers: the layers whose
    cache stops growing are the ones we count as windowed. transformers keeps w - 1 past
    tokens in a local layer (the current token is the w-th key); engines' paged caches and
    our count keep w, one token per local layer more."""
    config = TINY[label]
    model = build(config).to(torch.bfloat16)
    seq_len, batch = 13, 2
    window = config.get("sliding_window") or config["attention_chunk_size"]
    ids = torch.randint(0, config["vocab_size"], (batch, seq_len))
    with torch.no_grad():
        layers = model(ids, use_cache=True).past_key_values.layers
    capped = [layer for layer in layers if layer.keys.shape[-2] < seq_len]
    assert {layer.keys.shape[-2] for layer in capped} == {window - 1}
    arch = arch_from_config(config, name=label, origin=label)
    assert arch.num_windowed_layers == len(capped) > 0
    real = sum(layer.keys.numel() * layer.keys.element_size()
               + layer.values.numel() * layer.values.element_size() for layer in layers)
    one_token = 2 * arch.attention.num_kv_heads * arch.attention.head_dim * 2  # K, V bf16
    assert kv_cache_bytes(arch, seq_len, "bf16", batch=batch) == \
        real + len(capped) * batch * one_token


def test_a_multimodal_checkpoint_is_planned_as_its_language_model():
    """Gemma 3, Llama 4 and Mistral 3 checkpoints wrap a text model in `text_config`: the
    planner counts that model (transformers' *ForCausalLM of the text config), not the
    vision tower."""
    text = dict(TINY["gemma3_text"])
    wrapper = transformers.AutoConfig.for_model(
        "gemma3", text_config=text,
        vision_config=dict(hidden_size=32, intermediate_size=48, num_hidden_layers=1,
                           num_attention_heads=2, image_size=28, patch_size=14))
    with_vision = sum(p.numel() for p in build(wrapper.to_dict()).parameters())
    language = sum(p.numel() for p in build(text).parameters())
    counts = param_counts(arch_from_config(wrapper.to_dict(), name="g3", origin="g3"))
    assert counts.total == language < with_vision


def test_a_multimodal_checkpoints_vision_tower_is_estimated_as_a_floor_within_a_tenth():
    """The tower is not planned, but its note gives its size: the ViT-layer estimate
    (4h^2 + 2hf per layer) leaves out biases, norms, the patch embedding and the projector,
    so it is below the real tower, by less than a tenth at this shape."""
    text = dict(TINY["gemma3_text"])
    vision = dict(hidden_size=256, intermediate_size=1024, num_hidden_layers=4,
                  num_attention_heads=4, image_size=28, patch_size=14,
                  vision_use_head=False)  # as Gemma 3's own vision_config
    wrapper = transformers.AutoConfig.for_model("gemma3", text_config=text,
                                                vision_config=vision).to_dict()
    tower = sum(p.numel() for p in build(wrapper).parameters()) - \
        sum(p.numel() for p in build(text).parameters())
    [estimate] = arch_from_config({**wrapper, "quantization_config": {"quant_method": "fp8"}},
                                  name="g3", origin="g3").towers
    assert estimate.kind == "vision" and estimate.layers == 4 and estimate.hidden_size == 256
    assert 0.9 * tower < estimate.params_estimate < tower
