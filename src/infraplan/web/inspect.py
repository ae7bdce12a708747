"""Architecture math of a parsed model (an uploaded config.json never touches the disk):
the fields `infraplan model NAME --json` prints, from the same library functions."""

from __future__ import annotations

from infraplan.models import (
    ModelArch,
    forward_flops_per_token,
    kv_cache_bytes_per_token,
    matmul_flops_per_token,
    param_counts,
    training_flops_per_sequence,
)


def arch_summary(arch: ModelArch, seq_len: int) -> dict:
    counts = param_counts(arch)
    at = arch.attention
    return {
        "model": arch.name, "family": arch.family, "params_total": counts.total,
        "params_active": counts.active, "params_embedding": counts.embedding,
        "params_non_embedding": counts.non_embedding, "layers": arch.num_layers,
        "moe_layers": arch.num_moe_layers, "hidden_size": arch.hidden_size,
        "attention": at.kind, "heads": at.num_heads, "kv_heads": at.num_kv_heads,
        "head_dim": at.head_dim, "vocab_size": arch.vocab_size,
        "tied_embeddings": arch.tie_word_embeddings, "seq_len": seq_len,
        "matmul_flops_per_token": float(matmul_flops_per_token(arch)),
        "forward_flops_per_token": float(forward_flops_per_token(arch, seq_len)),
        "training_flops_per_token": float(training_flops_per_sequence(arch, seq_len).model
                                          / seq_len),
        "kv_cache_bytes_per_token": {d: float(kv_cache_bytes_per_token(arch, d))
                                     for d in ("bf16", "fp8")},
        "max_position_embeddings": arch.max_position_embeddings,
    }
