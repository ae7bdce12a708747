"""The iteration-time model against physical bounds and its own formulas."""

from __future__ import annotations

import numpy as np
import pytest

from infraplan.catalog import load_catalog
from infraplan.errors import InputError
from infraplan.models import load_model, param_counts
from infraplan.physics import hardware
from infraplan.physics.compute import memory_time
from infraplan.serving.deployment import Deployment, resolve
from infraplan.serving.memory import weight_bytes_per_gpu
from infraplan.serving.quantization import weight_format
from infraplan.serving.step_time import Speculation

H100 = load_catalog().accelerators.get("h100")


def decode_s(dep: Deployment, n: int, ctx: int = 0) -> float:
    a, b = resolve(dep).step.decode_coefficients(n)
    return a + b * ctx


def test_decode_is_bound_by_reading_the_weights():
    dep = Deployment(model="llama-3.1-8b", gpu="h100")
    weights = weight_bytes_per_gpu(load_model("llama-3.1-8b"), weight_format("bf16", H100,
                                                                             "bf16"), 1)
    floor = weights / H100.memory_bandwidth_bytes_per_s
    overhead = resolve(dep).step.overhead_s  # the engine's CPU share of the step
    t = decode_s(dep, 1) - overhead
    assert floor < t < 1.35 * floor
    # fp8 weights read half the bytes; int4 about a quarter
    t8 = decode_s(dep.model_copy(update={"weight_dtype": "fp8"}), 1) - overhead
    t4 = decode_s(dep.model_copy(update={"weight_dtype": "int4"}), 1) - overhead
    assert t4 < 0.75 * t8 and t8 < 0.75 * t


def test_prefill_is_bound_by_the_math():
    r = resolve(Deployment(model="llama-3.1-8b", gpu="h100"))
    tokens = 8192
    flops = 2 * param_counts(r.arch).active * tokens
    t = r.step.time(tokens, 0, 1, tokens * (tokens + 1) / 2, 0)
    assert flops / H100.peak_flops["bf16"] < t < 3 * flops / H100.peak_flops["bf16"]


def test_kv_reads_grow_decode_time_linearly_and_tp_shrinks_it():
    dep = Deployment(model="llama-3.1-70b", gpu="h100", tp=4, weight_dtype="fp8")
    short, long = decode_s(dep, 64, 64 * 100), decode_s(dep, 64, 64 * 4000)
    r = resolve(dep)
    kv_per_gpu = r.memory.kv_bytes_per_token
    assert long - short == pytest.approx(r.step.decode_s_per_token * 64 * 3900)
    assert long - short >= 64 * 3900 * kv_per_gpu / H100.memory_bandwidth_bytes_per_s
    assert decode_s(dep.model_copy(update={"tp": 8}), 1) < decode_s(dep, 1)


def test_moe_decode_reads_only_the_experts_it_touches():
    dep = Deployment(model="mixtral-8x7b", gpu="h100", tp=2)
    one, many = decode_s(dep, 1), decode_s(dep, 256)
    # one token touches 2 of 8 experts: well under the time of reading all of them
    assert one < 0.6 * many


def test_many_expert_decode_is_bound_by_reading_the_experts_not_by_launches():
    """Qwen3-30B-A3B, 128 experts in each of 48 layers: a decode step of 256 sequences
    touches nearly every expert. The experts of a layer run as one fused-MoE kernel, so the
    step stays within twice the time of reading the weights, about 9 ms (a launch per
    expert would add 128 x 48 x 3 launches, about 74 ms at 4 us each); routing copies,
    attention and the imperfect overlap of 16-row expert GEMMs near the ridge add 64 %."""
    dep = Deployment(model="qwen3-30b-a3b", gpu="h100", tp=2)
    r = resolve(dep)
    weights = weight_bytes_per_gpu(r.arch, weight_format("bf16", H100, "bf16"), 2)
    floor = weights / H100.memory_bandwidth_bytes_per_s
    t = decode_s(dep, 256) - r.step.overhead_s
    assert floor < t < 2 * floor


def test_speculation_tokens_per_step_and_cheaper_tokens():
    spec = Speculation(num_tokens=4, acceptance_rate=0.7)
    assert spec.tokens_per_step == pytest.approx((1 - 0.7 ** 5) / 0.3)
    assert Speculation(num_tokens=3, acceptance_rate=1.0).tokens_per_step == 4
    base = Deployment(model="llama-3.1-70b", gpu="h100", tp=4)
    ngram = Deployment.model_validate(dict(base.model_dump(), speculative={
        "method": "ngram", "num_tokens": 4, "acceptance_rate": 0.7}))
    assert decode_s(ngram, 1) < 0.5 * decode_s(base, 1)


def test_memory_plan_and_quantized_weights():
    arch = load_model("llama-3.1-70b")
    n = param_counts(arch).total
    bf16 = weight_bytes_per_gpu(arch, weight_format("bf16", H100, "bf16"), 1)
    int4 = weight_bytes_per_gpu(arch, weight_format("int4", H100, "bf16"), 1)
    assert bf16 == pytest.approx(2 * n)
    assert 0.25 * bf16 < int4 < 0.3 * bf16  # 4.125 bits + a 16-bit head and embedding
    with pytest.raises(Exception, match="no room for the KV cache"):
        resolve(Deployment(model="llama-3.1-70b", gpu="h100", tp=1))


@pytest.mark.parametrize("weight_dtype, offered", [
    ("bf16", ", quantize the weights (fp8, int4) or "),
    ("fp8", ", quantize the weights (int4) or "), ("int4", " or pick")])
def test_weights_that_do_not_fit_are_not_told_to_use_their_own_format(weight_dtype, offered):
    """The fix offers only formats smaller than the one that did not fit."""
    with pytest.raises(InputError) as info:
        resolve(Deployment(model="llama-3.1-405b", gpu="l4", weight_dtype=weight_dtype))
    assert f"raise tp (now 1) or pp (now 1){offered}" in str(info.value)


def test_pipeline_stages_split_weights_and_steps():
    one = resolve(Deployment(model="llama-3.1-405b", gpu="h100", tp=8, weight_dtype="fp8"))
    two = resolve(Deployment(model="llama-3.1-405b", gpu="h100", tp=8, pp=2))
    # bf16 on two stages is about fp8 on one (the head and embeddings stay 16-bit in fp8)
    assert two.memory.weight_bytes == pytest.approx(one.memory.weight_bytes, rel=0.03)
    assert two.memory.kv_tokens > one.memory.kv_tokens
    # the same model on twice the GPUs: a batch's step passes both stages (half the layers
    # each) and one send between them, so it takes the whole model's time and a little more;
    # the stages overlap across the pp engines a pipeline keeps in flight (simulate.py)
    base = resolve(Deployment(model="llama-3.1-70b", gpu="h100", tp=4))
    staged = resolve(Deployment(model="llama-3.1-70b", gpu="h100", tp=4, pp=2))
    a1, b1 = base.step.decode_coefficients(64)
    a2, b2 = staged.step.decode_coefficients(64)
    assert 1.0 < (a2 - staged.step.overhead_s) / (a1 - base.step.overhead_s) < 1.05
    assert b2 == pytest.approx(b1)


def test_pipeline_stages_add_throughput_not_speed():
    """A token still passes every layer in turn: pipeline stages do not cut its latency
    (they halved it before), but their pp engines in flight serve more requests at once."""
    from infraplan.serving.metrics import summarize
    from infraplan.serving.simulate import simulate
    from infraplan.serving.traffic import Requests

    def run(pp: int, arrivals):
        n = len(arrivals)
        dep = Deployment(model="llama-3.1-70b", gpu="h100", tp=4, pp=pp)
        result = simulate(dep, Requests(arrivals, np.full(n, 1000), np.full(n, 200)))
        assert len(result.busy_s) == pp  # one engine per stage in flight
        return summarize(result)

    light = np.arange(20) * 10.0  # one request at a time
    one, two = run(1, light), run(2, light)
    assert two["tpot_s"]["p50"] >= one["tpot_s"]["p50"]
    assert two["ttft_s"]["p50"] >= 0.95 * one["ttft_s"]["p50"]
    batch = np.zeros(4000)  # saturated: twice the GPUs, more cache, more throughput
    assert run(2, batch)["throughput"]["output_tokens_per_s"] > \
        1.2 * run(1, batch)["throughput"]["output_tokens_per_s"]


def test_draft_model_speculation_pays_for_its_drafts():
    base = Deployment(model="llama-3.1-70b", gpu="h100", tp=4, weight_dtype="fp8")
    spec = {"method": "draft", "num_tokens": 4, "acceptance_rate": 0.8,
            "draft_model": "llama-3.1-8b"}
    draft = Deployment.model_validate(dict(base.model_dump(), speculative=spec))
    ngram = Deployment.model_validate(dict(base.model_dump(), speculative=dict(
        spec, method="ngram", draft_model=None)))
    t_base, t_draft, t_ngram = (decode_s(d, 8, 8 * 1000) for d in (base, draft, ngram))
    assert t_ngram < t_draft < t_base  # drafts cost GPU time, n-gram lookup does not
    # the draft's four 8B decode steps, divided by the tokens a step keeps
    tau = Speculation(num_tokens=4, acceptance_rate=0.8).tokens_per_step
    small = resolve(Deployment(model="llama-3.1-8b", gpu="h100", tp=4)).step
    a, b = small.decode_coefficients(8)
    extra = 4 * (a - small.overhead_s + b * 8 * 1000) / tau
    assert t_draft - t_ngram == pytest.approx(extra, rel=0.02)
    with pytest.raises(Exception, match="draft_model is required"):
        Deployment.model_validate(dict(base.model_dump(), speculative=dict(
            spec, draft_model=None)))


def test_a_draft_model_takes_memory_beside_the_target():
    """Its 16-bit weights and its KV for every cached token come out of the target's cache
    (they were not counted: a 70B 'draft' ran beside an 8B on one H100)."""
    from infraplan.serving.memory import kv_bytes_per_token_per_gpu

    base = Deployment(model="llama-3.1-70b", gpu="h100", tp=4, weight_dtype="fp8")
    spec = {"method": "draft", "num_tokens": 4, "acceptance_rate": 0.8,
            "draft_model": "llama-3.1-8b"}
    alone = resolve(base).memory
    paired = resolve(Deployment.model_validate(dict(base.model_dump(),
                                                    speculative=spec))).memory
    draft = load_model("llama-3.1-8b")
    gpu = load_catalog().accelerators.get("h100")
    assert paired.weight_bytes - alone.weight_bytes == pytest.approx(
        weight_bytes_per_gpu(draft, weight_format("bf16", gpu, "bf16"), 4))
    assert paired.kv_bytes_per_token - alone.kv_bytes_per_token == pytest.approx(
        kv_bytes_per_token_per_gpu(draft, "bf16", 4))
    assert paired.kv_tokens < alone.kv_tokens
    # n-gram drafting costs no memory
    ngram = resolve(Deployment.model_validate(dict(base.model_dump(), speculative=dict(
        spec, method="ngram", draft_model=None)))).memory
    assert ngram == alone


@pytest.mark.parametrize("target, draft, message", [
    ("llama-3.1-8b", "llama-3.1-70b", "deployment.speculative.draft_model llama-3.1-70b has "
     "70.6B active parameters, no fewer than llama-3.1-8b's 8.03B"),
    ("llama-3.1-70b", "mixtral-8x7b", "deployment.speculative.draft_model mixtral-8x7b has a "
     "vocabulary of 32,000 tokens, llama-3.1-70b 128,256: engines refuse a draft with "
     "another tokenizer"),
])
def test_a_draft_no_engine_would_pair_is_refused(target, draft, message):
    dep = Deployment.model_validate({"model": target, "gpu": "h100", "tp": 8, "speculative": {
        "method": "draft", "acceptance_rate": 0.8, "draft_model": draft}})
    with pytest.raises(InputError) as info:
        resolve(dep)
    assert str(info.value).startswith(message) and "method: ngram" in str(info.value)


def test_hot_experts_slow_the_moe_step():
    even = resolve(Deployment(model="mixtral-8x7b", gpu="h100", tp=2)).step
    skewed = resolve(Deployment(model="mixtral-8x7b", gpu="h100", tp=2,
                                expert_imbalance=1.5)).step
    assert skewed.time(4096, 0, 1, 0, 0) > 1.2 * even.time(4096, 0, 1, 0, 0)
    assert skewed.decode_coefficients(1)[0] == pytest.approx(even.decode_coefficients(1)[0],
                                                             rel=0.05)


def test_moe_routing_copies_are_paid_at_memory_bandwidth(monkeypatch):
    """Mixtral (top-2, h 4096, 32 MoE layers): 6 h bf16 values a token and layer, 49,152
    bytes, read or written at HBM bandwidth around the grouped GEMMs."""
    from infraplan.serving import step_time

    arch = load_model("mixtral-8x7b")
    assert step_time.moe_routing_bytes_per_token(arch) == 2 * (2 + 2 * 2) * 4096
    dep = Deployment(model="mixtral-8x7b", gpu="h100", tp=2)
    tokens = 2048
    with_copies = resolve(dep).step.linear_s[tokens]
    monkeypatch.setattr(step_time, "moe_routing_bytes_per_token", lambda arch: 0.0)
    without = resolve(dep).step.linear_s[tokens]
    bandwidth = hardware.device(H100.name, "bf16", use="serving").memory_bytes_per_s
    assert with_copies - without == pytest.approx(tokens * 32 * 49_152 / bandwidth)


def test_parallel_attention_all_reduces_once_per_layer():
    from infraplan.models.families import arch_from_config
    from infraplan.physics.collectives import all_reduce, group
    from infraplan.serving.step_time import build_step_model

    base = dict(model_type="falcon", hidden_size=4096, num_attention_heads=64,
                num_hidden_layers=32, vocab_size=65024)
    parallel = arch_from_config(base, name="p", origin="p")
    sequential = arch_from_config(dict(base, parallel_attn=False), name="s", origin="s")
    assert parallel.parallel_residual and not sequential.parallel_residual
    fmt = weight_format("bf16", H100, "bf16")
    fab = hardware.fabric(hardware.cluster(H100.name))

    def linear(arch, tp, tokens):
        return build_step_model(arch, H100, tp=tp, weights=fmt, kv_dtype="bf16",
                                max_tokens=tokens, max_seqs=8, overhead_s=0.0).linear_s[tokens]

    tokens = 512
    saved = 32 * float(all_reduce(tokens * 4096 * 2.0, group(2, 1, fab), fab))
    assert linear(sequential, 2, tokens) - linear(parallel, 2, tokens) == pytest.approx(saved)
    assert linear(sequential, 1, tokens) == linear(parallel, 1, tokens)


def test_grouped_decode_by_engine_release():
    """TensorRT-LLM before 0.8 has no XQA; 0.8's precompiled XQA groups only 8 query heads
    per KV head at head size 128; the XQA JIT groups up to 32; vLLM always groups."""
    from infraplan.catalog import load_catalog

    engines = load_catalog().engines
    trt, vllm = engines.get("tensorrt-llm"), engines.get("vllm")
    assert trt.decode_kv_reads(4, 128, "0.7.1") == 4  # Mistral 7B before XQA
    assert trt.decode_kv_reads(8, 128, "0.7.1") == 8  # Llama 2 70B before XQA
    assert trt.decode_kv_reads(8, 128, "0.8.0") == 1  # Llama 2 70B with XQA
    assert trt.decode_kv_reads(8, 128, "0.7a") == 1  # the pre-release build NVIDIA measured
    assert trt.decode_kv_reads(4, 128, "0.7a") == 4  # ... with 0.8's shapes only
    assert trt.decode_kv_reads(4, 128, "0.8.0") == 4  # Mistral: group size not compiled
    assert trt.decode_kv_reads(29, 64, "0.9.0") == 29  # Falcon-180B: neither
    assert trt.decode_kv_reads(29, 64, "0.11.0") == 1
    assert trt.decode_kv_reads(4, 128, None) == 1  # the newest release
    assert trt.decode_kv_reads(1, 128, "0.5.0") == 1  # MHA reads its cache once anyway
    assert vllm.decode_kv_reads(4, 128, "0.2.0") == 1


def test_ungrouped_decode_rereads_shared_kv_heads_from_l2():
    """Mistral 7B on TensorRT-LLM 0.8 (4 query heads per KV head, no XQA kernel): each
    cached token's KV is read once from HBM and 3 more times from L2."""
    from infraplan.serving.memory import kv_bytes_per_token_per_gpu

    new = Deployment(model="mistral-7b", gpu="h100", engine="tensorrt-llm", kv_dtype="fp8")
    old = new.model_copy(update={"engine_version": "0.8.0"})
    kv = kv_bytes_per_token_per_gpu(load_model("mistral-7b"), "fp8", 1)
    hbm = hardware.device(H100.name, "fp8", use="serving").memory_bytes_per_s
    assert H100.l2_bandwidth_bytes_per_s is not None
    assert resolve(new).step.decode_s_per_token == pytest.approx(kv / hbm)
    assert resolve(old).step.decode_s_per_token == pytest.approx(
        kv / hbm + 3 * kv / H100.l2_bandwidth_bytes_per_s)


def test_ungrouped_decode_without_an_l2_figure_reads_hbm_each_time():
    from infraplan.serving.step_time import _kv_read_cost

    assert _kv_read_cost(1, 3e12, None) == 1.0
    assert _kv_read_cost(4, 3e12, None) == 4.0
    assert _kv_read_cost(4, 3e12, 6e12) == pytest.approx(2.5)


def test_near_the_ridge_a_gemm_pays_for_imperfect_overlap(monkeypatch):
    """Llama 3.1 8B in bf16 on an H100: one sequence's decode step reads weights (far below
    the ridge point), 8,192 prompt tokens are math (far above); a step of 256 tokens sits
    near the ridge (about 250 FLOP per weight byte), where the fitted p-norm charges the
    most over the sharp roofline: up to 2^(1/p) x. Far from it the blend costs a small
    share of that (the GEMV's math beside the weight read at batch 1)."""
    import math

    import numpy as np

    from infraplan.physics.hardware import calibration
    from infraplan.serving.step_time import build_step_model

    arch = load_model("llama-3.1-8b")

    def linear_s(exponent: float) -> np.ndarray:
        with monkeypatch.context() as patch:
            patch.setattr(hardware, "calibration", lambda name: exponent
                          if name == "serving-roofline-exponent" else calibration(name))
            hardware.device.cache_clear()
            step = build_step_model(arch, H100, tp=1, weights=weight_format("bf16", H100,
                                                                            "bf16"),
                                    kv_dtype="bf16", max_tokens=8192, max_seqs=256,
                                    overhead_s=0.0)
        hardware.device.cache_clear()
        return np.array(step.linear_s)

    p = calibration("serving-roofline-exponent")
    blend, sharp = linear_s(p), linear_s(math.inf)
    ratio = {n: blend[n] / sharp[n] for n in (1, 256, 8192)}
    assert ratio[1] - 1 < (ratio[256] - 1) / 8 and ratio[8192] - 1 < (ratio[256] - 1) / 8
    assert ratio[256] > 1 + 0.5 * (2 ** (1 / p) - 1)
    assert ratio[256] > ratio[8192] and ratio[256] <= 2 ** (1 / p) + 1e-9


def test_a_one_row_gemm_runs_as_a_gemv_on_the_vector_cores():
    """Batch-1 decode of 4-bit weights on an RTX 4090: the weights shrink fourfold but the
    math does not, so padding each row to a 16-row tensor-core tile (0.5 x 1/16 of the tile
    rate) would put the GEMMs near the ridge point. A GEMV kernel runs the row on the
    vector cores at the fp32 FMA rate instead (82.6 of 165.2 TFLOP/s: half the tensor
    rate), and the step stays bound by reading the weights."""
    from infraplan.serving.step_time import split_k_efficiency

    rtx = load_catalog().accelerators.get("rtx-4090")
    dev = hardware.device("rtx-4090", "fp16", use="serving")
    assert dev.vector_share == pytest.approx(82.6 / 165.2)
    assert split_k_efficiency(1.0, 4096, 4096, dev) == pytest.approx(0.5)
    # many rows: tensor-core tiles win again
    assert split_k_efficiency(4096.0, 4096, 4096, dev) > 0.9
    # a chip whose vector cores are slow next to its tensor cores (H100: 67 of 989)
    # still prefers the tensor tiles from 16 rows on
    h100 = hardware.device("h100", "bf16", use="serving")
    assert split_k_efficiency(16.0, 4096, 4096, h100) > h100.vector_share

    dep = Deployment(model="llama-2-7b", gpu="rtx-4090", weight_dtype="int4",
                     kv_dtype="fp16")
    step = resolve(dep).step
    weights = weight_bytes_per_gpu(load_model("llama-2-7b"),
                                   weight_format("int4", rtx, "fp16"), 1)
    floor = weights / rtx.memory_bandwidth_bytes_per_s
    assert floor < step.linear_s[1] + step.head_s[1] < 1.35 * floor


# vLLM's benchmark_moe.py, tuned Triton fused_moe kernel, one NVIDIA L40S, E=128 N=768 fp8
# W8A8 (Qwen3-30B-A3B's MoE layer at TP 1: h 2048, 768 per expert, top-8), Triton 3.6.0:
# median kernel time in us by tokens M (vllm-project/vllm PR #53710, "Tuned (us)" column).
# M = 2 (37.8 us) is left out: its 16 touched experts, 75 MB of fp8 weights, fit in the
# L40S's 96 MB L2, so the benchmark's repeated calls read them from cache, below the HBM
# floor (87 us at 864 GB/s) that the model charges.
L40S_QWEN3_MOE_FP8_US = {4: 190.41, 8: 347.98, 16: 552.82, 32: 742.22, 64: 839.49,
                         128: 870.36, 256: 897.68, 512: 948.74, 1024: 1052.11,
                         2048: 1286.40, 4096: 1846.43, 8192: 3195.68}


def test_routed_experts_match_a_measured_fused_moe_kernel():
    """One MoE layer's expert GEMMs (gate and up 2048 -> 768, down 768 -> 2048) from
    weight-read-bound at 4 tokens to math-bound at 8,192, within 15 % of the measured
    kernel at every M (the model is 1-12 % slower)."""
    from infraplan.models import gemms
    from infraplan.serving.step_time import routed_expert_s

    l40s = load_catalog().accelerators.get("l40s")
    arch = load_model("qwen3-30b-a3b")
    dev = hardware.device(l40s.name, "fp8", use="serving")
    tokens = np.array(list(L40S_QWEN3_MOE_FP8_US), dtype=float)
    routed = [g for g in gemms(arch) if g.routed_expert]
    assert [g.name for g in routed] == ["expert_gate", "expert_up", "expert_down"]
    seconds = sum(routed_expert_s(dev, tokens, g.fan_out, g.fan_in, arch.moe.num_experts,
                                  g.tokens_per_token, 1.0) for g in routed)
    measured = np.array(list(L40S_QWEN3_MOE_FP8_US.values())) * 1e-6
    assert np.all(np.abs(seconds / measured - 1) < 0.15), seconds / measured


def test_smoothquant_pays_two_quantize_kernels_a_layer(monkeypatch):
    """W8A8 SmoothQuant: the attention output and the MLP activation (h 4096 and 14336 wide
    for Llama 3.1 8B) are read in 16 bits and written in int8 by a kernel of their own, two
    launches in each of 32 layers; fp8 and the B300's dequantised int8 have none."""
    from infraplan.serving import quantization

    a100 = load_catalog().accelerators.get("a100-sxm4-40gb")
    assert weight_format("int8", a100, "bf16").quantize_kernels_per_layer == 2
    assert weight_format("fp8", H100, "bf16").quantize_kernels_per_layer == 0
    b300 = load_catalog().accelerators.get("b300-sxm-288gb")
    assert weight_format("int8", b300, "bf16").quantize_kernels_per_layer == 0
    dep = Deployment(model="llama-3.1-8b", gpu="a100-sxm4-40gb", weight_dtype="int8")
    tokens = 512
    with_kernels = resolve(dep).step.linear_s[tokens]
    monkeypatch.setattr(quantization, "SMOOTHQUANT_UNFUSED_INPUTS", ())
    without = resolve(dep).step.linear_s[tokens]
    dev = hardware.device(a100.name, "int8", use="serving")
    assert with_kernels - without == pytest.approx(
        memory_time(dev, tokens * 32 * 3 * (4096 + 14336), count=64))


def test_vllm_before_0_6_pays_cpu_time_per_running_sequence():
    """vLLM 0.5 loops over the batch in Python between steps (20 ms at about 200 sequences,
    vllm-project/vllm#6801): 90 us a sequence on top of the fixed 2 ms, in decode steps and
    for the sequences a mixed step samples; 0.6 and later, the newest release and
    TensorRT-LLM pay the fixed cost alone, and the GPU's part of a step is unchanged."""
    engines = load_catalog().engines
    vllm = engines.get("vllm")
    assert vllm.overhead_s_per_sequence("0.5.4") == pytest.approx(90e-6)
    assert vllm.overhead_s_per_sequence("0.6.0") == 0.0
    assert vllm.overhead_s_per_sequence(None) == 0.0
    assert engines.get("tensorrt-llm").overhead_s_per_sequence("0.5.0") == 0.0
    base = Deployment(model="llama-3.1-8b", gpu="h100", engine="vllm", engine_version="0.5.4")
    old = resolve(base).step
    new = resolve(base.model_copy(update={"engine_version": "0.6.0"})).step
    assert (old.linear_s, old.head_s, old.overhead_s) == (new.linear_s, new.head_s, 2e-3)
    for n in (1, 64, 200):
        (a_old, b_old), (a_new, b_new) = old.decode_coefficients(n), new.decode_coefficients(n)
        assert (a_old - a_new, b_old) == (pytest.approx(n * 90e-6), b_new)
    mixed = dict(prefill_tokens=512, n_decode=63, samples=64, prefill_pairs=1e5,
                 decode_ctx=6e4)
    assert old.time(**mixed) - new.time(**mixed) == pytest.approx(64 * 90e-6)


def test_vllm_v0_quantizes_every_fp8_gemm_input_on_its_own():
    """vLLM before 0.8 runs scaled_fp8_quant before each of a layer's four fp8 GEMMs (QKV
    and gate/up inputs h wide, attention output 4096 and MLP activation 14336 for Llama 3.1
    8B at TP 1); its newest release, TensorRT-LLM's fp8 and vLLM's weight-only fp8 on an
    A100 (no fp8 tensor cores: nothing to quantize) pay none."""
    base = Deployment(model="llama-3.1-8b", gpu="h100", weight_dtype="fp8", engine="vllm",
                      engine_version="0.5.4")

    def step(**update):
        return resolve(base.model_copy(update=update)).step

    old, new, trt = step(), step(engine_version=None), step(engine="tensorrt-llm",
                                                           engine_version="0.17")
    tokens = 64
    dev = hardware.device(H100.name, "fp8", use="serving")
    extra = memory_time(dev, tokens * 32 * 3 * (2 * 4096 + 4096 + 14336), count=4 * 32)
    assert old.linear_s[tokens] - new.linear_s[tokens] == pytest.approx(extra)
    assert new.linear_s[tokens] == pytest.approx(trt.linear_s[tokens])
    a100 = Deployment(model="llama-3.1-8b", gpu="a100-sxm4-80gb", weight_dtype="fp8",
                      engine="vllm", engine_version="0.5.4")
    assert resolve(a100).step.linear_s[tokens] == pytest.approx(
        resolve(a100.model_copy(update={"engine_version": None})).step.linear_s[tokens])


def test_a_named_node_type_carries_the_tp_collectives_over_its_own_links():
    """GH200 at TP 2: two superchips bridged by NVLink (gh200-nvl2-144gb) all-reduce over
    the bridge, one superchip per node (the GH200's default node) over InfiniBand. Weights
    and cache are the same; the layer time differs by exactly Llama 3.1 8B's 32 x 2
    all-reduces over the two fabrics. A node holding another GPU is refused by name."""
    from infraplan.physics.collectives import all_reduce, group

    base = Deployment(model="llama-3.1-8b", gpu="gh200-144gb", tp=2)
    bridged = base.model_copy(update={"system": "gh200-nvl2-144gb"})
    tokens = 256
    saved = 0.0
    for node, sign in (("gh200-144gb-1x-server", 1.0), ("gh200-nvl2-144gb", -1.0)):
        fab = hardware.fabric(hardware.cluster("gh200-144gb", node))
        saved += sign * 64 * float(all_reduce(tokens * 4096 * 2.0, group(2, 1, fab), fab))
    assert saved > 0
    assert resolve(base).step.linear_s[tokens] - resolve(bridged).step.linear_s[tokens] == \
        pytest.approx(saved)
    assert resolve(base).memory.kv_tokens == resolve(bridged).memory.kv_tokens
    with pytest.raises(InputError, match="system 'gh200-nvl2-144gb' holds gh200-144gb, not "
                                         "h100-sxm5-80gb"):
        resolve(base.model_copy(update={"gpu": "h100", "system": "gh200-nvl2-144gb"}))


def test_trtllm_pytorch_backend_host_loop_floors_the_step_by_host_cpu():
    """From 1.0 TensorRT-LLM's Python executor loop runs beside the GPU: a step lasts the
    longer of the GPU's time and the host's, 29.4 us a sequence on a Grace host (GB200,
    NVIDIA/TensorRT-LLM#10273) and at least 13.8 us on an x86 one (#11983). Release 0.21
    (the TensorRT engine runtime) and vLLM have no floor; the GPU's part is unchanged."""
    base = Deployment(model="qwen3-30b-a3b", gpu="gb200", engine="tensorrt-llm",
                      weight_dtype="fp4", kv_dtype="fp8", engine_version="1.0")
    grace = resolve(base).step
    x86 = resolve(base.model_copy(update={"gpu": "b200"})).step
    old = resolve(base.model_copy(update={"engine_version": "0.21"})).step
    newest = resolve(base.model_copy(update={"engine_version": None})).step
    assert (grace.host_s_per_sequence, x86.host_s_per_sequence) == (
        pytest.approx(29.4e-6), pytest.approx(13.8e-6))
    assert newest.host_s_per_sequence == grace.host_s_per_sequence
    assert old.host_s_per_sequence == 0.0
    vllm = resolve(Deployment(model="llama-3.1-8b", gpu="gh200", engine="vllm")).step
    assert vllm.host_s_per_sequence == 0.0
    assert grace.linear_s == old.linear_s and grace.overhead_s == old.overhead_s
    for n in (1, 64, 2048):
        a, b = grace.decode_coefficients(n)
        for ctx in (0.0, 1e5, 1e7):
            gpu = a + b * ctx
            assert grace.time(0, n, n, 0.0, ctx) == pytest.approx(max(gpu, 29.4e-6 * n))
            assert old.time(0, n, n, 0.0, ctx) == pytest.approx(gpu)
    # a small MoE at a large batch is host-bound on Grace: 2,048 sequences, 128 cached tokens
    a, b = grace.decode_coefficients(2048)
    assert a + b * 2048 * 128 < 2048 * 29.4e-6 == pytest.approx(
        grace.time(0, 2048, 2048, 0.0, 2048 * 128))
    # speculation: the host loop runs once an iteration, which yields tau tokens a sequence
    spec = resolve(Deployment.model_validate(dict(base.model_dump(), speculative=dict(
        method="ngram", num_tokens=3, acceptance_rate=0.6)))).step
    tau = spec.speculation.tokens_per_step
    assert spec.floor_s(2048) == pytest.approx(2048 * 29.4e-6 / tau)
    assert spec.time(0, 2048, 2048, 0.0, 0.0) >= spec.floor_s(2048)
    assert spec.time(512, 2048, 2048, 1e5, 0.0) >= 2048 * spec.host_s_per_sequence  # whole
