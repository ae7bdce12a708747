"""trtllm-bench's engine sizing: its own KV estimate, its rounding, and the buffers the
engine it builds holds."""

from __future__ import annotations

import pytest

from infraplan.catalog import load_catalog
from infraplan.models import load_model, param_counts
from infraplan.serving import trtllm_bench
from infraplan.serving.deployment import Deployment, resolve

CATALOG = load_catalog()


def bench(model: str, gpu: str, weight_dtype: str, kv_dtype: str | None = None,
          tp: int = 1) -> Deployment:
    return Deployment(model=model, gpu=gpu, tp=tp, weight_dtype=weight_dtype,
                      kv_dtype=kv_dtype, engine="tensorrt-llm", tuning="trtllm-bench")


def test_trtllm_bench_limits_follow_its_rounding():
    assert trtllm_bench.limits(1_000_000, 128, 128) == (4096, 8192)
    assert trtllm_bench.limits(5_000_000, 2048, 128) == (2304, 32768)  # 2,298 rounded
    assert trtllm_bench.limits(100_000, 1000, 1000) == (64, 2048)
    assert trtllm_bench.limits(1_000_000, 1000, 1000) == (512, 2048)


def test_trtllm_bench_engine_reserves_buffers_for_its_own_limits():
    """70B fp8 on one H100 leaves a few GB: the engine trtllm-bench builds holds activation
    and logits buffers for its chosen limits (64 sequences, 2,048 tokens here), not for the
    engine defaults (2,048 and 8,192), and the cache gets what that frees."""
    dep = Deployment(model="llama-3.1-70b", gpu="h100", weight_dtype="fp8", kv_dtype="fp8",
                     engine="tensorrt-llm", tuning="trtllm-bench")
    default = resolve(dep.model_copy(update={"tuning": "engine"}))
    bench = resolve(dep, mean_lengths=(128.0, 2048.0))
    assert (bench.max_num_seqs, bench.max_num_batched_tokens) == (64, 2048)
    arch = load_model("llama-3.1-70b")
    live = 2 * 8192 + 2 * 28672 + 8192 + 2 * 8 * 128  # per token: input, gate+up, QKV
    logits = 64 * arch.vocab_size * 4.0 * 2
    assert bench.memory.activation_bytes == pytest.approx(2048 * live * 2.0 + logits)
    freed = default.memory.activation_bytes - bench.memory.activation_bytes
    assert freed > 2.5e9  # 2,048 x 128,256 fp32 logits and probabilities alone are 2.1 GB
    assert bench.memory.kv_bytes == pytest.approx(default.memory.kv_bytes + 0.95 * freed)


def test_pipeline_stages_share_the_batch():
    # 1e6 / 256 = 3,906 requests over 2 stages: 1,953 -> 2,048; tokens 3,906 -> 4,096
    assert trtllm_bench.limits(1_000_000, 128, 128, pp=2) == (2048, 4096)


def test_kv_estimate_is_trtllm_bench_arithmetic_not_the_runtime_plan():
    """0.95 x (NVML total - parameters at 1 byte for fp8) / (2 x 32 layers x 8 KV heads x
    128 x 1 byte): no buffers or CUDA context subtracted."""
    arch, h100 = load_model("llama-3.1-8b"), CATALOG.accelerators.get("h100")
    got = trtllm_bench.kv_tokens_estimate(arch, h100, tp=1, pp=1, weight_dtype="fp8",
                                          kv_dtype="fp8")
    free = h100.memory_bytes - param_counts(arch).total * 1.0
    assert got == pytest.approx(0.95 * free / (2 * 32 * 8 * 128))
    # each of 16 ranks keeps at least one of the 8 KV heads; bf16 counts 2 bytes
    wide = trtllm_bench.kv_tokens_estimate(arch, h100, tp=16, pp=1, weight_dtype="bf16",
                                           kv_dtype="bf16")
    free16 = 16 * h100.memory_bytes - param_counts(arch).total * 2.0
    assert wide == pytest.approx(0.95 * free16 / (2 * 32 * 16 * 128 * 2))


def test_weight_only_formats_count_two_bytes_and_fall_to_the_floors():
    """trtllm-bench's byte table has no weight-only entry: 70B int8 counts 141 GB on one
    80 GB A100, so its estimate is empty and the limits are the floors (64, 2,048)."""
    arch, a100 = load_model("llama-3.1-70b"), CATALOG.accelerators.get("a100-sxm4-80gb")
    assert trtllm_bench.kv_tokens_estimate(arch, a100, tp=1, pp=1, weight_dtype="int8",
                                           kv_dtype="int8") == 0.0
    r = resolve(bench("llama-3.1-70b", "a100-sxm4-80gb", "int8"), mean_lengths=(128., 128.))
    assert (r.max_num_seqs, r.max_num_batched_tokens) == (64, 2048)
    assert r.memory.kv_tokens > 0


def test_a_model_that_nearly_fills_the_gpu_is_sized_by_the_bench_limits():
    """Mixtral 8x7B in fp8 leaves about 1.6 GB of an L40S. The engine defaults' buffers
    (2,048 sequences of 32,000 fp32 logits and probabilities, 8,192 tokens) would not fit;
    trtllm-bench builds the engine for the few requests its estimate holds."""
    dep = bench("mixtral-8x7b", "l40s", "fp8", "fp8")
    with pytest.raises(Exception, match="no room for the KV cache"):
        resolve(dep.model_copy(update={"tuning": "engine"}))
    r = resolve(dep, mean_lengths=(128.0, 128.0))
    assert r.max_num_seqs == 96  # the estimate holds 90 requests of 256 tokens
    assert r.max_num_batched_tokens == 2048
    assert 0 < r.memory.kv_tokens < 10_000
