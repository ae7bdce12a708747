"""KV-cache bytes per token for MHA, GQA, MQA and MLA.

MHA/GQA/MQA cache K and V per layer per KV head: 2 * L * k * d elements per token
(MQA is k = 1, MHA is k = a). MLA (DeepSeek-V2, Sec. 2.1.2 and Table 1) caches the
compressed latent c_KV and the decoupled RoPE key: (d_c + d_h^R) * L elements per token,
which is what vLLM, SGLang and `transformers` 5 store (checked against a real cache in the
tests). Older implementations cached the expanded per-head keys and values:
`mla_layout="expanded"` gives that figure.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from infraplan.dtypes import dtype_bytes
from infraplan.models.arch import ModelArch


def kv_cache_elements_per_token(arch: ModelArch, *,
                                mla_layout: Literal["latent", "expanded"] = "latent") -> int:
    at, L = arch.attention, arch.num_layers
    if at.kind == "mla":
        if mla_layout == "latent":
            return L * (at.kv_lora_rank + at.qk_rope_head_dim)
        return L * at.num_heads * (at.head_dim + at.v_head_dim)
    return L * at.num_kv_heads * (at.head_dim + at.v_head_dim)


def kv_cache_bytes_per_token(arch: ModelArch, dtype: str = "bf16", *,
                             mla_layout: Literal["latent", "expanded"] = "latent") -> float:
    """Bytes one cached token costs across all layers (fp8 and int8 caches: 1 byte)."""
    return kv_cache_elements_per_token(arch, mla_layout=mla_layout) * dtype_bytes(
        dtype, field="kv_dtype")


def kv_cache_bytes(arch: ModelArch, seq_len, dtype: str = "bf16", *, batch: int = 1,
                   mla_layout: Literal["latent", "expanded"] = "latent"):
    """Cache of `batch` sequences of `seq_len` tokens; a sliding window keeps only the last
    `sliding_window` tokens (Mistral 7B v0.1's rolling buffer cache) in the layers that use
    it (all of Mistral's; alternate layers of Gemma 2 and gpt-oss)."""
    tokens = np.asarray(seq_len, dtype=float)
    layers, local = arch.num_layers, arch.num_windowed_layers
    window = arch.attention.sliding_window or 0
    # cached (token, layer) pairs, over the layer count: exact in floating point
    layer_tokens = local * np.minimum(tokens, window) + (layers - local) * tokens
    per_layer = kv_cache_bytes_per_token(arch, dtype, mla_layout=mla_layout) / layers
    return batch * layer_tokens * per_layer
