"""The defaults of `transformers`' configuration classes (5.x, the `__init__` signatures of
models/<family>/configuration_<family>.py) where they differ from the readers' generic
fallbacks: as many key/value heads as attention heads, a head width of h / a, no sliding
window, a window used whenever one is set, no shared expert group.

A key the file leaves out takes the value here, as `transformers` would build the model.
Some of these defaults are the sizes of one sample checkpoint (Gemma 7B's 16 key/value
heads, DeepSeek-V3's 8 expert groups): where such a default cannot fit the config (16
key/value heads for 8 attention heads) the reader asks for the key instead of building a
model that `transformers` could not run. Keys whose class default is None and that the
modeling file then cannot use (DeepSeek-V2's num_experts_per_tok, dots.llm1's
n_shared_experts, Qwen2-MoE's sample-sized shared expert) are required.
tests/models/test_config_audit_s63.py checks this table against the installed classes.
"""

from __future__ import annotations

_GEMMA2 = dict(num_key_value_heads=4, head_dim=256, sliding_window=4096)
_QWEN = dict(sliding_window=4096, use_sliding_window=False, max_position_embeddings=32768)
_DEEPSEEK_V3 = dict(q_lora_rank=1536, n_shared_experts=1, first_k_dense_replace=3,
                    n_group=8, topk_group=4)

TRANSFORMERS_DEFAULTS: dict[str, dict[str, object]] = {
    "llama": dict(max_position_embeddings=2048),
    "mistral": dict(num_key_value_heads=8, sliding_window=4096,
                    max_position_embeddings=131072),
    "qwen2": dict(_QWEN, num_key_value_heads=32),
    "qwen3": dict(_QWEN, num_key_value_heads=32, head_dim=128),
    "mixtral": dict(num_key_value_heads=8, max_position_embeddings=131072),
    "qwen2_moe": dict(_QWEN, num_key_value_heads=16),
    "qwen3_moe": dict(_QWEN, num_key_value_heads=4),
    "deepseek_v3": _DEEPSEEK_V3,
    "kimi_k2": _DEEPSEEK_V3,  # built as deepseek_v3
    "deepseek_v2": dict(q_lora_rank=1536, n_shared_experts=2, max_position_embeddings=2048),
    "gemma": dict(num_key_value_heads=16, head_dim=256, max_position_embeddings=8192),
    "gemma2": dict(_GEMMA2, max_position_embeddings=8192),
    "gemma3_text": dict(_GEMMA2, max_position_embeddings=131072),
    "granite": dict(max_position_embeddings=2048),
    "granitemoe": dict(max_position_embeddings=2048),
    "olmo": dict(max_position_embeddings=2048),
    "olmo2": dict(max_position_embeddings=2048),
    "olmo3": dict(sliding_window=4096, max_position_embeddings=2048),
    "olmoe": dict(max_position_embeddings=4096),
    "cohere": dict(max_position_embeddings=8192),
    "cohere2": dict(sliding_window=4096, max_position_embeddings=8192),
    "exaone4": dict(num_key_value_heads=32, sliding_window=4096, max_position_embeddings=2048),
    "stablelm": dict(num_key_value_heads=32),
    "phi": dict(max_position_embeddings=2048),
    "gpt_oss": dict(num_key_value_heads=8, head_dim=64, sliding_window=128,
                    max_position_embeddings=131072),
    "llama4_text": dict(num_key_value_heads=8, head_dim=128, attention_chunk_size=8192,
                        max_position_embeddings=131072),
    "starcoder2": dict(num_key_value_heads=2),
    "glm": dict(max_position_embeddings=131072),
    "glm4": dict(max_position_embeddings=131072),
    "glm4_moe": dict(max_position_embeddings=131072),
    "dots1": dict(max_position_embeddings=2048),
    "phimoe": dict(max_position_embeddings=131072),
    "ernie4_5": dict(max_position_embeddings=131072),
    "ernie4_5_moe": dict(max_position_embeddings=131072),
    "seed_oss": dict(max_position_embeddings=524288),
    "smollm3": dict(num_key_value_heads=4, max_position_embeddings=32768),
    "hunyuan_v1_dense": dict(max_position_embeddings=2048),
    "hunyuan_v1_moe": dict(max_position_embeddings=2048),
}
