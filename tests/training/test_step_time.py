"""The step-time model: formulas of its parts, and invariants over random plans."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infraplan.models import load_model
from infraplan.physics import collectives as coll
from infraplan.physics.compute import Device, gemm_time, wave_efficiency
from infraplan.training.evaluate import TrainingJob, evaluate_plan
from infraplan.training.layer_time import PlanArrays, distinct_nodes_per_token, layer_time
from infraplan.training.plan import ParallelPlan
from infraplan.training.step_time import BREAKDOWN

FABRIC = coll.Fabric(gpus_per_node=8, intra_bytes_per_s=200e9, inter_bytes_per_s=20e9,
                     intra_latency_s=5e-6, inter_latency_s=10e-6)


def test_ring_all_reduce_inside_a_node():
    group = coll.group(8, 1, FABRIC)
    size = 1e9
    ring = 2 * 7 / 8 * size / 200e9 + 2 * 7 * 5e-6
    tree = 2 * size / 200e9 + 2 * 3 * 5e-6
    assert coll.all_reduce(size, group, FABRIC) == pytest.approx(min(ring, tree))


def test_groups_crossing_nodes_are_limited_by_their_nics():
    # DP group with TP=8 inside the node: one rank per node, one NIC's bandwidth
    dp = coll.group(16, 8, FABRIC)
    assert (dp.size, dp.per_node) == (16, 1)
    assert coll.bus_bandwidth(dp, FABRIC) == pytest.approx(20e9)
    # DP group with TP=2: four ranks per node share four NICs
    dp4 = coll.group(16, 2, FABRIC)
    assert dp4.per_node == 4 and coll.bus_bandwidth(dp4, FABRIC) == pytest.approx(80e9)
    assert coll.reduce_scatter(1e9, dp, FABRIC) == pytest.approx(15 / 16 * 1e9 / 20e9
                                                                 + 15 * 10e-6)
    assert coll.all_reduce(1e9, coll.group(1, 1, FABRIC), FABRIC) == 0.0


def test_wave_quantization_and_k_efficiency():
    """108 SMs: a 128 x 256 output tile grid of 108 tiles fills one wave exactly. With
    109 rows of tiles the big tiles need a second, nearly empty wave (109/216 busy); the
    best is then 64 x 128 tiles (efficiency 0.8): 436 tiles in 5 waves of 108."""
    assert wave_efficiency(128 * 108, 256, 108) == pytest.approx(1.0)
    assert wave_efficiency(128 * 109, 256, 108) == pytest.approx(0.8 * 436 / 540)
    dev = Device(gemm_flops=100e12, attention_flops=50e12, memory_bytes_per_s=2e12,
                 compute_units=None, kernel_overhead_s=0.0, gemm_k_overhead=400)
    big = gemm_time(dev, 8192, 8192, 8192, bytes_per_element=2)
    assert big == pytest.approx(2 * 8192**3 / 100e12 * (8192 + 400) / 8192)
    # skinny and memory-bound: reading the operands dominates
    skinny = gemm_time(dev, 1, 8192, 8192, bytes_per_element=2)
    assert skinny == pytest.approx((8192 + 8192 * 8192 + 8192) * 2 / 2e12)


def test_a_grouped_gemm_fills_the_waves_of_all_its_groups_and_launches_once():
    """16 experts of 256 x 256 outputs on 108 SMs: alone, each is 2 big tiles (2 of 108
    SMs busy); grouped, 32 tiles share one wave, as one 4096 x 256 GEMM would. A grouped
    kernel pays one launch, not one per expert."""
    assert wave_efficiency(256, 256, 108, groups=16) == pytest.approx(
        wave_efficiency(16 * 256, 256, 108))
    dev = Device(gemm_flops=100e12, attention_flops=50e12, memory_bytes_per_s=2e12,
                 compute_units=108, kernel_overhead_s=1e-3, gemm_k_overhead=0)
    grouped = gemm_time(dev, 256, 256, 8192, bytes_per_element=2, groups=16)
    stacked = gemm_time(dev, 16 * 256, 256, 8192, bytes_per_element=2)
    assert grouped == pytest.approx(stacked)  # compute-bound: the same tiles and FLOPs
    one_by_one = gemm_time(dev, 256, 256, 8192, bytes_per_element=2, count=16)
    assert one_by_one - grouped > 15 * dev.kernel_overhead_s


def test_pipeline_bubble_is_p_minus_1_over_v_micro_batches():
    """1F1B: (m + p - 1) micro-batch slots; interleaving divides the bubble by v."""
    arch = load_model("llama-2-7b")
    job = TrainingJob(seq_len=4096, global_batch=64)
    for vp in (1, 2, 4):
        plan = ParallelPlan(tp=1, pp=4, dp=1, vp=vp, micro_batch=1)
        r = evaluate_plan(arch, "h100", job, plan)
        per_microbatch = (r.breakdown_s["compute"] + r.breakdown_s["pp_p2p"]) / 64
        assert r.breakdown_s["bubble"] == pytest.approx(3 / vp * per_microbatch, rel=0.02)


def test_uneven_chunks_pay_the_bubble_of_the_largest_chunk():
    """32 layers in 4 stages of 3 virtual chunks: 12 chunks of 3 or 2 layers (8 per rank).
    The fill and drain pass the largest chunk's 3 layers, not a third of the rank's 8:
    the bubble is 3 x 3/8 micro-batch slots, not 3 x 1/3."""
    arch = load_model("llama-2-7b")
    job = TrainingJob(seq_len=4096, global_batch=64)
    r = evaluate_plan(arch, "h100", job, ParallelPlan(tp=1, pp=4, dp=1, vp=3, micro_batch=1))
    per_microbatch = (r.breakdown_s["compute"] + r.breakdown_s["pp_p2p"]) / 64
    assert r.breakdown_s["bubble"] == pytest.approx(3 * 3 / 8 * per_microbatch, rel=0.02)


def test_interleaved_pipelines_overlap_their_steady_state_sends():
    """Megatron-LM overlaps the interleaved schedule's steady-state sends and receives with
    the next chunk's compute (overlap_p2p_comm, on unless --no-overlap-p2p-communication);
    the plain 1F1B schedule sends on the critical path. Interleaving over 2 chunks doubles
    the sends per micro-batch, of which the overlap-interference share stays exposed."""
    from infraplan.physics.hardware import calibration

    arch = load_model("llama-2-7b")
    job = TrainingJob(seq_len=4096, global_batch=64)
    p2p = {vp: evaluate_plan(arch, "h100", job, ParallelPlan(tp=1, pp=4, dp=1, vp=vp,
                                                             micro_batch=1)
                             ).breakdown_s["pp_p2p"] for vp in (1, 2)}
    assert p2p[1] > 0
    assert p2p[2] == pytest.approx(2 * calibration("overlap-interference") * p2p[1])


def test_a_pipeline_spanning_nodes_sends_between_stages_over_the_network():
    """Megatron-LM orders ranks tp-cp-dp-pp, so pipeline stages sit tp x cp x dp ranks apart.
    PP=4 x DP=4 on two 8-GPU nodes put stages 0-1 on one node and 2-3 on the other: the
    send from stage 1 to 2 crosses the NICs and paces every micro-batch. It was priced on
    NVLink because one stage (4 GPUs) fits in a node."""
    from infraplan.physics import hardware

    arch = load_model("llama-2-7b")
    job = TrainingJob(seq_len=4096, global_batch=64)
    fab = hardware.fabric(hardware.cluster("h100"))
    size = 4096 * arch.hidden_size * 2  # one micro-batch's bf16 activations, TP=1

    def p2p_per_microbatch(dp):
        plan = ParallelPlan(tp=1, pp=4, dp=dp, micro_batch=1)
        return evaluate_plan(arch, "h100", job, plan).breakdown_s["pp_p2p"] / (64 / dp)

    assert p2p_per_microbatch(2) == pytest.approx(2 * coll.send_recv(size, True, fab))
    assert p2p_per_microbatch(4) == pytest.approx(2 * coll.send_recv(size, False, fab))
    assert p2p_per_microbatch(4) > 5 * p2p_per_microbatch(2)


def test_fp8_pays_a_cast_of_every_gemm_input_and_output_gradient():
    """Llama 3.1 8B, TP 1: the forward quantizes the inputs of qkv (h), attn_out (h),
    gate/up (h, one shared copy) and down (f); the backward the gradients of their outputs
    (q + 2 kv = 6144, h, f, f, h). Four bytes per element, at memory bandwidth."""
    arch = load_model("llama-3.1-8b")
    dev = Device(gemm_flops=1e15, attention_flops=5e14, memory_bytes_per_s=3e12,
                 compute_units=None, kernel_overhead_s=0.0)
    one = np.ones(1)
    p = PlanArrays(tp=one, pp=one, dp=one, cp=one, ep=one, etp=one, vp=one, zero=0 * one,
                   sp=0 * one, mb=2 * one, recompute=0 * one, microbatches=one,
                   tp_overlap=0 * one, ep_overlap=0 * one)
    kw = dict(seq_len=4096, kernels="fused", moe_layer=False)
    bf, fp8 = layer_time(arch, dev, FABRIC, p, **kw), layer_time(arch, dev, FABRIC, p,
                                                                fp8=True, **kw)
    tokens, h, f = 2 * 4096, 4096, 14336
    assert fp8.forward - bf.forward == pytest.approx(4 * tokens * (3 * h + f) / 3e12)
    assert fp8.backward - bf.backward == pytest.approx(
        4 * tokens * (6144 + 2 * h + 2 * f) / 3e12)


def test_fp8_training_runs_the_lm_head_in_16_bits():
    """Megatron-Core's output layer is outside Transformer Engine's fp8 autocast, and
    torchtitan's float8 conversion skips 'output' (filter_fqns): the head's GEMMs ran at the
    fp8 rate with 1-byte operands."""
    from infraplan.physics import hardware
    from infraplan.training.step_time import _head_time

    fp8, bf16 = (hardware.device("h100-sxm5-80gb", d) for d in ("fp8", "bf16"))
    assert fp8.gemm16_flops == bf16.gemm_flops and bf16.gemm16_flops == 0.0
    assert fp8.gemm_flops > 1.5 * bf16.gemm_flops
    arch, one = load_model("llama-3.1-8b"), np.ones(1)
    p = PlanArrays(tp=one, pp=one, dp=one, cp=one, ep=one, etp=one, vp=one, zero=0 * one,
                   sp=0 * one, mb=one, recompute=0 * one, microbatches=one,
                   tp_overlap=0 * one, ep_overlap=0 * one)
    tokens = 4096 * one
    assert _head_time(arch, fp8, FABRIC, p, tokens) == _head_time(arch, bf16, FABRIC, p, tokens)
    # three GEMMs of 2 x tokens x 4096 x 128,256 FLOPs at no more than the 16-bit rate
    assert _head_time(arch, fp8, FABRIC, p, tokens)[0] > 3 * 2 * 4096 * 4096 * 128256 / \
        bf16.gemm_flops


def test_a_token_crosses_the_network_once_per_destination_node():
    """DeepSeek-V3 (k = 8 experts in 4 of 8 groups) with EP 64 over 8 nodes, one group per
    node: a token reaches exactly 4 nodes, 3.5 of them remote in expectation, so 3.5 / 8 of
    its routed copies cross a NIC instead of the 56 / 64 a copy-per-expert all-to-all sends.
    Without the group limit its 8 experts reach 8 (1 - (7/8)^8) = 5.25 nodes, 7/8 of them
    remote."""
    arch = load_model("deepseek-v3")
    moe = arch.moe
    nodes = np.array([1.0, 4.0, 8.0, 16.0])
    expected = [1.0, 4 * (1 - math.comb(6, 4) / math.comb(8, 4)), 4.0, 8 * (1 - (7 / 8) ** 8)]
    assert distinct_nodes_per_token(moe, nodes) == pytest.approx(expected)
    ungrouped = replace(moe, expert_groups=1, groups_per_token=1)
    assert distinct_nodes_per_token(ungrouped, 8.0) == pytest.approx(8 * (1 - (7 / 8) ** 8))
    every_group = replace(moe, groups_per_token=8)  # no limit: only k bounds the spread
    assert distinct_nodes_per_token(every_group, 8.0) == pytest.approx(8 * (1 - (7 / 8) ** 8))

    dev = Device(gemm_flops=1e15, attention_flops=5e14, memory_bytes_per_s=3e12,
                 compute_units=None, kernel_overhead_s=0.0)
    one = np.ones(1)
    p = PlanArrays(tp=one, pp=one, dp=64 * one, cp=one, ep=64 * one, etp=one, vp=one,
                   zero=0 * one, sp=0 * one, mb=one, recompute=0 * one, microbatches=one,
                   tp_overlap=0 * one, ep_overlap=0 * one)
    kw = dict(seq_len=4096, kernels="fused", moe_layer=True)
    size = 4096 * 8 * arch.hidden_size * 2.0
    passes = 2 * 2  # dispatch + combine, forward + backward
    grouped = layer_time(arch, dev, FABRIC, p, **kw).ep_comm
    plain = layer_time(replace(arch, moe=ungrouped), dev, FABRIC, p, **kw).ep_comm
    assert grouped == pytest.approx(passes * (3.5 / 8 * size / 20e9 + 63 * 10e-6))
    spread = 8 * (1 - (7 / 8) ** 8) * 7 / 8
    assert plain == pytest.approx(passes * (spread / 8 * size / 20e9 + 63 * 10e-6))


def test_a_rack_scale_nvlink_domain_keeps_tensor_parallel_traffic_off_the_nics():
    """GB200 NVL72: nodes (trays) of 4 GPUs, one NVLink domain of 72. A TP=16 group stays on
    NVLink there; on the same trays without the rack's NVLink it crosses the NICs."""
    from infraplan.physics import hardware

    rack = hardware.cluster("gb200", "dgx-gb200-nvl72")
    assert (rack.system.accelerators_per_node, rack.system.scale_up_accelerators) == (4, 72)
    assert rack.nic_bytes_per_s_per_gpu == pytest.approx(50e9)  # one 400 Gb/s NIC per GPU
    fab = hardware.fabric(rack)
    assert fab.gpus_per_node == 72
    # the ring figure measured on one tray (679.61 GB/s) holds for the whole domain
    assert coll.bus_bandwidth(coll.group(16, 1, fab), fab) == pytest.approx(679.61e9)
    # a DP group of two racks, one rank per TP=72 block: one NIC per rank
    dp = coll.group(2, 72, fab)
    assert dp.per_node == 1 and coll.bus_bandwidth(dp, fab) == pytest.approx(
        fab.inter_bytes_per_s)

    trays = rack.system.model_copy(update={"name": "gb200-trays-without-nvlink-domain",
                                           "scale_up_domain_accelerators": None})
    arch = load_model("llama-3.1-70b")
    job = TrainingJob(seq_len=8192, global_batch=64)
    plan = ParallelPlan(tp=16, dp=4, recompute="full")
    in_rack = evaluate_plan(arch, "gb200", job, plan, system="dgx-gb200-nvl72")
    across = evaluate_plan(arch, "gb200", job, plan, system=trays)
    # 4 GPUs per tray share 4 NICs (4 x 45 GB/s) against NVLink's 679.61 GB/s: 3.8x the time
    assert across.breakdown_s["tp_comm"] > 3.5 * in_rack.breakdown_s["tp_comm"] > 0
    assert across.step_s > in_rack.step_s


def test_context_parallel_divides_compute_and_adds_ring_traffic():
    arch = load_model("llama-3.1-8b")
    job = TrainingJob(seq_len=65536, global_batch=8)
    one = evaluate_plan(arch, "h100", job, ParallelPlan(dp=8, zero=3, recompute="full"))
    four = evaluate_plan(arch, "h100", job, ParallelPlan(dp=2, cp=4, zero=3,
                                                         recompute="full"))
    assert four.breakdown_s["compute"] == pytest.approx(one.breakdown_s["compute"], rel=0.1)
    assert four.hidden_s.get("cp_comm", 0) + four.breakdown_s["cp_comm"] > 0


@pytest.mark.parametrize("micro_batches", [1, 8])
def test_zero2_reduce_scatters_every_micro_batch_zero1_once_per_step(micro_batches):
    """ZeRO-1 and -2 move the same bytes per reduction (a gradient reduce-scatter, then the
    weight all-gather); ZeRO-2 keeps only its gradient shard, so each micro-batch's backward
    ends in its own reduce-scatter: m + 1 collectives per step against ZeRO-1's 2."""
    arch = load_model("llama-2-7b")
    job = TrainingJob(seq_len=4096, global_batch=16 * micro_batches)
    sent = {}
    for zero in (1, 2):
        r = evaluate_plan(arch, "h100", job, ParallelPlan(dp=16, zero=zero, micro_batch=1))
        sent[zero] = r.breakdown_s["dp_comm"] + r.hidden_s.get("dp_comm", 0.0)
        assert r.breakdown_s["dp_comm"] > 0
    assert sent[2] == pytest.approx((micro_batches + 1) / 2 * sent[1], rel=1e-9)


def test_interleaving_shrinks_the_bubble_not_the_compute():
    arch = load_model("gpt3-175b")
    job = TrainingJob(seq_len=2048, global_batch=256)
    base = ParallelPlan(tp=8, pp=8, dp=2, micro_batch=1, recompute="full")
    plain = evaluate_plan(arch, "a100-sxm4-80gb", job, base)
    inter = evaluate_plan(arch, "a100-sxm4-80gb", job, replace(base, vp=3))
    assert inter.breakdown_s["bubble"] < plain.breakdown_s["bubble"]
    assert np.isclose(inter.breakdown_s["compute"], plain.breakdown_s["compute"])


def test_parallel_residual_layers_halve_tensor_parallel_traffic():
    """GPT-J-style layers sum attention and MLP outputs before one reduction per pass."""
    sequential = load_model("gpt3-175b")
    parallel = replace(sequential, parallel_residual=True)
    job = TrainingJob(seq_len=2048, global_batch=64)
    plan = ParallelPlan(tp=8, pp=8, dp=1, micro_batch=1, recompute="full",
                        sequence_parallel=True)
    seq = evaluate_plan(sequential, "a100-sxm4-80gb", job, plan)
    par = evaluate_plan(parallel, "a100-sxm4-80gb", job, plan)

    def tp_total(r):
        return r.breakdown_s["tp_comm"] + r.hidden_s.get("tp_comm", 0.0)
    assert tp_total(par) == pytest.approx(tp_total(seq) / 2)
    assert par.breakdown_s["compute"] == pytest.approx(seq.breakdown_s["compute"])


def test_backward_tensor_parallel_collectives_run_beside_weight_gradients():
    """Without Transformer Engine's userbuffers, Megatron-LM still launches the backward's
    collectives asynchronously: a column-parallel linear's input-gradient all-reduce runs
    beside its weight-gradient GEMM (async_tensor_model_parallel_allreduce). GPT-3 175B at
    TP=8 has a 50 MB all-reduce next to a 0.23 TFLOP GEMM, which covers it; so of the
    forward's and the backward's equal all-reduces, only the forward's and the overlap
    interference share of the backward's are exposed. With sequence parallelism the
    backward also re-gathers each column-parallel input (beside its input-gradient GEMM)
    and all-gathers each row-parallel output gradient, which nothing covers: of ten
    all-gather-sized collectives per layer, the forward's four and those two are exposed."""
    from infraplan.physics.hardware import calibration

    arch = load_model("gpt3-175b")
    job = TrainingJob(seq_len=2048, global_batch=8)
    interference = calibration("overlap-interference")
    for sp, exposed_share in ((False, (1 + interference) / 2),
                              (True, (6 + 4 * interference) / 10)):
        plan = ParallelPlan(tp=8, pp=8, dp=1, micro_batch=1, recompute="none",
                            sequence_parallel=sp)
        r = evaluate_plan(arch, "a100-sxm4-80gb", job, plan)
        exposed = r.breakdown_s["tp_comm"]
        total = exposed + r.hidden_s["tp_comm"]
        assert exposed == pytest.approx(exposed_share * total, rel=1e-6)


MODELS = ["llama-3.1-8b", "mixtral-8x7b", "gpt3-175b", "qwen2.5-7b"]


@st.composite
def plans(draw):
    arch = load_model(draw(st.sampled_from(MODELS)))
    heads = arch.attention.num_heads
    tp = draw(st.sampled_from([t for t in (1, 2, 4, 8) if heads % t == 0
                               and arch.mlp.intermediate_size % t == 0]))
    pp = draw(st.sampled_from([1, 2, 4]))
    dp = draw(st.sampled_from([1, 2, 4, 8]))
    mb = draw(st.sampled_from([1, 2]))
    ep = draw(st.sampled_from([e for e in (1, 2, 4, 8)
                               if arch.is_moe and dp % e == 0 and 8 % e == 0] or [1]))
    recompute = draw(st.sampled_from(["none", "selective", "full"]))
    plan = ParallelPlan(tp=tp, pp=pp, dp=dp, ep=ep, micro_batch=mb, recompute=recompute,
                        zero=draw(st.integers(0, 3)), sequence_parallel=tp > 1 and
                        draw(st.booleans()), vp=draw(st.sampled_from([1, 2])) if pp > 1 else 1)
    gpu = draw(st.sampled_from(["h100", "a100-sxm4-80gb", "b200"]))
    # fp8 only where there are fp8 tensor cores (A100 refuses it: test_fp8_needs_an_fp8_peak)
    precisions = ["bf16"] if gpu.startswith("a100") else ["bf16", "fp8"]
    job = TrainingJob(seq_len=draw(st.sampled_from([1024, 4096])), global_batch=dp * mb * 8,
                      tokens=1e11, precision=draw(st.sampled_from(precisions)))
    return arch, plan, job, gpu


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plans())
def test_step_time_is_positive_finite_and_adds_up(case):
    arch, plan, job, gpu = case
    r = evaluate_plan(arch, gpu, job, plan)
    assert math.isfinite(r.step_s) and r.step_s > 0
    assert all(v >= 0 and math.isfinite(v) for v in r.breakdown_s.values())
    assert sum(r.breakdown_s.values()) == pytest.approx(r.step_s)
    assert set(r.breakdown_s) == set(BREAKDOWN)
    assert 0 < r.mfu <= r.hfu < 1


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plans())
def test_more_gpus_never_increase_total_flops(case):
    """The same job on twice the data-parallel replicas does the same total work: the
    hardware FLOPs per step (HFU x step x GPUs x peak) stay equal, per GPU they halve."""
    arch, plan, job, gpu = case
    bigger = replace(plan, dp=plan.dp * 2)
    a = evaluate_plan(arch, gpu, job, plan)
    b = evaluate_plan(arch, gpu, job, bigger)
    total_a = a.hfu * a.step_s * plan.num_gpus
    total_b = b.hfu * b.step_s * bigger.num_gpus
    assert total_b == pytest.approx(total_a, rel=1e-9)
    assert total_b / bigger.num_gpus < total_a / plan.num_gpus


def test_a_slow_loader_stalls_the_step():
    """Pre-tokenised text never stalls; 50 kB per token from a managed NFS tier does:
    the stall is what the tier's per-node read rate cannot deliver within the step."""
    from infraplan.catalog import load_catalog

    arch = load_model("llama-3.1-8b")
    plan = ParallelPlan(dp=8, zero=1)
    tier = load_catalog().storage.get("aws-efs-elastic")
    text = evaluate_plan(arch, "h100", TrainingJob(seq_len=4096, global_batch=64,
                                                   storage=tier.name), plan)
    assert text.breakdown_s["data_stall"] == 0.0
    heavy = TrainingJob(seq_len=4096, global_batch=64, storage=tier.name,
                        data_bytes_per_token=50e3)
    slow = evaluate_plan(arch, "h100", heavy, plan)
    read_s = 64 * 4096 * 50e3 / tier.read_bytes_per_s_per_node
    if tier.read_bytes_per_s_aggregate:
        read_s = max(read_s, 64 * 4096 * 50e3 / tier.read_bytes_per_s_aggregate)
    assert slow.breakdown_s["data_stall"] == pytest.approx(read_s - text.step_s, rel=1e-6)
    assert slow.step_s == pytest.approx(read_s, rel=1e-6)


def test_mfu_numerator_counts_only_the_keys_inside_a_sliding_window():
    """A 2-layer Mistral-style model, window 8, sequences of 32: every query attends
    min(32, 8) = 8 keys (the full-sequence convention of PaLM App. B, capped by the window),
    not 32. Per token the weight GEMMs cost 2 x (64 x 128 + 64 x 64 + 3 x 64 x 128) per
    layer x 2 layers + 2 x 64 x 100 (LM head) = 160,256 FLOPs; per query and key
    2 x 4 heads x (16 + 16) x 2 layers = 512. Forward: 32 x 160,256 + 512 x 32 x 8 =
    5,259,264; a step of 2 sequences x 3 (forward + backward) = 31,555,584. The old count
    scored all 32 keys per query: 33,914,880 (and MFU 1291 % on mistral-7b at 1M tokens)."""
    from infraplan.models.families import arch_from_config
    from infraplan.training.step_time import StepOptions, flops_per_step

    arch = arch_from_config(dict(
        model_type="mistral", hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
        head_dim=16, intermediate_size=128, num_hidden_layers=2, vocab_size=100,
        sliding_window=8, max_position_embeddings=64, tie_word_embeddings=False),
        name="tiny-window", origin="test")
    model, hardware = flops_per_step(arch, StepOptions(seq_len=32, global_batch=2))
    assert model == hardware == 2 * 3 * (32 * 160_256 + 512 * 32 * 8) == 31_555_584


def test_a_windowed_model_on_long_sequences_stays_below_100_percent_mfu():
    """mistral-7b (window 4,096) on 1M-token sequences reported 'MFU 1291%'."""
    arch = load_model("mistral-7b")
    job = TrainingJob(seq_len=1_048_576, global_batch=64, tokens=1e10)
    for recompute in ("none", "full"):
        r = evaluate_plan(arch, "h100", job, ParallelPlan(tp=8, cp=8, zero=1,
                                                          recompute=recompute))
        assert 0 < r.mfu <= r.hfu < 1


def test_expert_all_to_all_overlap_hides_all_but_the_unpaired_passes():
    """Mixtral 8x7B on 16 H100s, EP 8, no pipeline, 8 micro-batches: Megatron-Core's
    combined 1F1B leaves the first forward's and the last backward's all-to-alls (one
    micro-batch's worth, 1/m of the step's) exposed, and hides the other pairs' behind
    compute at the overlap-interference share. Hidden + exposed is the plain plan's."""
    from infraplan.physics.hardware import calibration

    arch = load_model("mixtral-8x7b")
    job = TrainingJob(seq_len=4096, global_batch=128)
    plain = ParallelPlan(tp=1, pp=1, dp=16, ep=8, micro_batch=1)
    off = evaluate_plan(arch, "h100", job, plain)
    on = evaluate_plan(arch, "h100", job, replace(plain, ep_comm_overlap=True))
    total, m = off.breakdown_s["ep_comm"], 8
    assert total > 0 and "ep_comm" not in off.hidden_s
    compute = on.breakdown_s["compute"] / m
    assert total / m < compute  # each pair's all-to-alls fit behind its compute
    share = calibration("overlap-interference")
    assert on.breakdown_s["ep_comm"] == pytest.approx(total / m + (m - 1) / m * share * total)
    assert on.breakdown_s["ep_comm"] + on.hidden_s["ep_comm"] == pytest.approx(total)
    assert on.step_s < off.step_s
    # one more micro-batch of activations in flight
    assert on.memory_bytes > off.memory_bytes
    assert "EP-overlap" in on.describe()


@pytest.mark.parametrize("change, words", [
    (dict(ep=1, dp=16), "needs ep > 1"),
    (dict(pp=2, dp=8, vp=1), "interleaved schedule"),
    (dict(recompute="full"), "full recomputation"),
])
def test_expert_all_to_all_overlap_refuses_what_megatron_core_refuses(change, words):
    from infraplan.errors import PlanError
    from infraplan.training.plan import check_plan

    arch = load_model("mixtral-8x7b")
    plan = replace(ParallelPlan(tp=1, pp=1, dp=16, ep=8, micro_batch=1, ep_comm_overlap=True),
                   **change)
    with pytest.raises(PlanError, match=words):
        check_plan(arch, plan, seq_len=4096, global_batch=128)
    check_plan(arch, replace(plan, ep_comm_overlap=False), seq_len=4096, global_batch=128)
