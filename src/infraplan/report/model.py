"""One model's architecture math: parameters, FLOPs per token, KV-cache bytes per token."""

from __future__ import annotations

from infraplan.models import (ModelArch, ParamCounts, forward_flops_per_token, kv_cache_bytes,
                              kv_cache_bytes_per_token, load_model, matmul_flops_per_token,
                              param_counts, training_flops_per_sequence)
from infraplan.training.memory import model_notes
from infraplan.units import KiB, MiB, format_count, format_flops

DEFAULT_SEQ_LEN = 4096  # FLOPs per token are quoted at this length, or the model's context


def model_summary(name: str, seq_len: int | None = None) -> dict:
    """`infraplan model NAME`: a catalog model or a config.json path."""
    return arch_summary(load_model(name), seq_len)


def arch_summary(arch: ModelArch, seq_len: int | None = None) -> dict:
    """Parameters, FLOPs per token and KV bytes per token of a parsed architecture (also
    what the web page shows for an uploaded config.json), with the text view. Without
    `seq_len`: DEFAULT_SEQ_LEN, or the model's context if that is shorter."""
    if seq_len is None:
        seq_len = min(DEFAULT_SEQ_LEN, arch.max_position_embeddings)
    counts = param_counts(arch)
    at = arch.attention
    forward = float(forward_flops_per_token(arch, seq_len))
    training = training_flops_per_sequence(arch, seq_len).model / seq_len
    kv = {dtype: float(kv_cache_bytes_per_token(arch, dtype)) for dtype in ("bf16", "fp8")}
    data = {
        "model": arch.name, "family": arch.family, "params_total": counts.total,
        "params_active": counts.active, "params_embedding": counts.embedding,
        "params_non_embedding": counts.non_embedding, "layers": arch.num_layers,
        "moe_layers": arch.num_moe_layers, "hidden_size": arch.hidden_size,
        "attention": at.kind, "heads": at.num_heads, "kv_heads": at.num_kv_heads,
        "head_dim": at.head_dim, "vocab_size": arch.vocab_size,
        "tied_embeddings": arch.tie_word_embeddings, "seq_len": seq_len,
        "matmul_flops_per_token": float(matmul_flops_per_token(arch)),
        "forward_flops_per_token": forward, "training_flops_per_token": float(training),
        "kv_cache_bytes_per_token": kv,
        "max_position_embeddings": arch.max_position_embeddings,
        "kv_cache_values_per_layer": cached_values_per_layer(arch),
        "notes": model_notes(arch, seq_len),
    }
    moe = arch.moe
    active = ""
    if arch.is_moe:
        active = f", {format_count(counts.active)} active per token"
        if not arch.tie_word_embeddings:
            # the input table is a lookup, not a matmul: model cards differ on counting it
            # (gpt-oss's 5.1B leaves it out, Mixtral's 12.9B keeps it)
            lookup_free = counts.active - counts.embedding
            data["params_active_without_input_embedding"] = lookup_free
            active += f" ({format_count(lookup_free)} without the input embedding)"
    lines = [
        f"{arch.name} ({arch.family}): {format_count(counts.total)} parameters{active}",
        f"  {arch.num_layers} layers, hidden {arch.hidden_size}, vocab {arch.vocab_size}"
        + (", tied embeddings" if arch.tie_word_embeddings else ""),
        *("  " + line for line in attention_lines(arch)),
    ]
    window, local = at.sliding_window, arch.num_windowed_layers
    if local:
        # past the window, a local layer's cache stops growing: only the global ones grow
        beyond = float(kv_cache_bytes(arch, window + 1) - kv_cache_bytes(arch, window))
        data.update(sliding_window=window, windowed_layers=local,
                    kv_cache_bytes_per_token_beyond_window=beyond)
        lines.append(f"  sliding window of {window:,} tokens on {local} of {arch.num_layers} "
                     f"layers: past it, a token adds {_kib(beyond)} in bf16")
    if moe:
        data["moe"] = {"experts": moe.num_experts, "experts_per_token": moe.experts_per_token,
                       "shared_expert_width": moe.shared.intermediate_size if moe.shared
                       else 0, "expert_width": moe.expert.intermediate_size}
        lines.append(f"  MoE on {arch.num_moe_layers} layers: {moe.num_experts} experts, "
                     f"{moe.experts_per_token} per token"
                     + (", shared experts" if moe.shared else ""))
    if arch.mtp_layers:
        data["mtp_layers"] = arch.mtp_layers
        lines.append(f"  + {arch.mtp_layers} multi-token-prediction module(s), not counted")
    if arch.stored:  # a quantized checkpoint: what serving loads unless told otherwise
        data["stored_weights"] = {"method": arch.stored.method,
                                  "weight_dtype": arch.stored.weight_dtype,
                                  "attention_unquantized": arch.stored.attention_unquantized}
        lines.append(f"  quantization_config: weights stored as {arch.stored.describe()}")
    lines += [
        "  " + embedding_line(arch, counts),
        f"FLOPs per token at seq {seq_len} (causal): forward {format_flops(forward)}, "
        f"training (3x forward) {format_flops(training)}",
        f"KV cache per token: {_kib(kv['bf16'])} in bf16, {_kib(kv['fp8'])} in fp8",
    ]
    lines += [f"note: {n}" for n in data["notes"]]
    data["text"] = "\n".join(lines)
    return data


def embedding_line(arch: ModelArch, counts: ParamCounts) -> str:
    """The embedding / non-embedding split with its convention. Non-embedding is Kaplan et
    al. 2020's N, everything but the token (and learned position) tables: a tied output
    layer is that same table, so it is left out too (the Gemma 2 report's figures); an untied
    one is a weight of its own and is counted, as every report of an untied model does. The
    FLOPs, by contrast, count the output layer's matmul either way."""
    positions = f" + {format_count(counts.position_embedding)} positions" \
        if counts.position_embedding else ""
    if arch.tie_word_embeddings:
        return (f"embedding {format_count(counts.embedding)} (tied to the output layer)"
                f"{positions}, non-embedding {format_count(counts.non_embedding)} (all else)")
    return (f"embedding {format_count(counts.embedding)}{positions}, non-embedding "
            f"{format_count(counts.non_embedding)} (all else, the untied output layer's "
            f"{format_count(counts.lm_head)} included)")


def _kib(n_bytes: float) -> str:
    """Bytes a token caches: KiB to a tenth (128.0 KiB), MiB past 1,024 KiB (12.5 MiB for a
    1T-parameter MHA model, printed as 12,800.0 KiB)."""
    return f"{n_bytes / MiB:,.1f} MiB" if n_bytes >= MiB else f"{n_bytes / KiB:,.1f} KiB"


def cached_values_per_layer(arch: ModelArch) -> int:
    """Values a token leaves in one full-attention layer's KV cache: a key and a value per
    KV head, or MLA's shared latent and its rope key (DeepSeek-V2 Sec. 2.1.2: 512 + 64 for
    V3, whatever the head count)."""
    at = arch.attention
    if at.kind == "mla":
        return at.kv_lora_rank + at.qk_rope_head_dim
    return at.num_kv_heads * (at.head_dim + at.v_head_dim)


def attention_lines(arch: ModelArch) -> list[str]:
    """'attention GQA: 64 heads, 8 KV heads, head dim 64'; MLA also says what it caches,
    since its keys and values are rebuilt per head from the latent, not stored."""
    at = arch.attention
    if at.kind != "mla":
        return [f"attention {at.kind.upper()}: {at.num_heads} heads, {at.num_kv_heads} KV "
                f"heads, head dim {at.head_dim}"]
    return [f"attention MLA: {at.num_heads} heads, query/key dim {at.head_dim} "
            f"({at.head_dim - at.qk_rope_head_dim} + {at.qk_rope_head_dim} rope), value dim "
            f"{at.v_head_dim}",
            f"  cached per token and layer: a {at.kv_lora_rank}-wide latent + a "
            f"{at.qk_rope_head_dim}-wide rope key ({cached_values_per_layer(arch)} values), "
            "shared by all heads"]
