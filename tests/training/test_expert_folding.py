"""MoE parallel folding (Megatron-Core --expert-tensor-parallel-size below TP): the experts'
own etp x ep x expert-DP grid over a pipeline stage's ranks."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from infraplan.errors import InputError, PlanError
from infraplan.models import load_model
from infraplan.physics.memory.states import stage_params
from infraplan.physics import collectives as coll
from infraplan.physics.compute import Device
from infraplan.training.evaluate import TrainingJob, evaluate_plan, plan_arrays
from infraplan.training.layer_time import layer_time
from infraplan.physics.memory.training import MemoryOptions
from infraplan.training.memory import training_memory
from infraplan.training.plan import ParallelPlan, check_plan
from infraplan.training.plan_train import plan_training
from infraplan.workloads import TrainScenario

FABRIC = coll.Fabric(gpus_per_node=8, intra_bytes_per_s=200e9, inter_bytes_per_s=20e9,
                     intra_latency_s=5e-6, inter_latency_s=10e-6)
DEVICE = Device(gemm_flops=1e15, attention_flops=5e14, memory_bytes_per_s=3e12,
                compute_units=None, kernel_overhead_s=0.0)


def test_ep_spans_tp_ranks_only_when_the_experts_are_folded():
    """DeepSeek-V3 at TP 2 x DP 32: EP 64 does not divide DP x CP (EP carved out of DP),
    but with etp = 1 the expert grid 1 x 64 x 1 covers the stage's 2 x 32 ranks."""
    arch = load_model("deepseek-v3")
    plan = ParallelPlan(tp=2, pp=8, dp=32, ep=64, micro_batch=1)
    with pytest.raises(PlanError, match=r"ep=64 must divide dp\*cp = 32.*etp=1"):
        check_plan(arch, plan, seq_len=4096)
    assert check_plan(arch, replace(plan, etp=1), seq_len=4096) == 8
    with pytest.raises(PlanError, match="etp=8 must divide tp=4"):
        check_plan(arch, ParallelPlan(tp=4, dp=32, ep=8, etp=8), seq_len=4096)
    with pytest.raises(PlanError, match=r"etp\*ep = 1\*64 must divide tp\*dp\*cp = 32"):
        check_plan(arch, ParallelPlan(tp=2, dp=16, ep=64, etp=1), seq_len=4096)
    with pytest.raises(PlanError, match="etp=1 but llama-3.1-8b has no experts"):
        check_plan(load_model("llama-3.1-8b"), ParallelPlan(tp=2, etp=1), seq_len=4096)
    assert replace(plan, etp=1).describe().startswith("TP=2 PP=8 DP=32 EP=64 ETP=1")
    assert "ETP" not in replace(plan, etp=2).describe()


def test_a_folded_rank_holds_whole_experts_and_shards_them_over_more_ranks():
    """Mixtral 8x7B, TP 2 EP 4 over 8 GPUs: unfolded a rank holds 1/(2 x 4) of the experts,
    folded 1/4; ZeRO-1 then shards their optimizer states over tp x dp / (etp x ep) = 1
    and 2 ranks, so the folded rank keeps the same optimizer bytes for twice the weights."""
    arch = load_model("mixtral-8x7b")
    options = MemoryOptions(seq_len=4096)
    plan = ParallelPlan(tp=2, dp=4, ep=4, zero=1, sequence_parallel=True)
    tp_wide = training_memory(arch, "h100", plan, options, global_batch=8)
    folded = training_memory(arch, "h100", replace(plan, etp=1), options, global_batch=8)
    experts = stage_params(arch, 1, 1).experts[0]
    assert folded.params_per_gpu - tp_wide.params_per_gpu == pytest.approx(
        experts / 4 - experts / 8, rel=1e-12)
    # states: 12 B per parameter (fp32 master + Adam moments), experts over 1 vs 2 ranks
    assert tp_wide.optimizer_bytes == pytest.approx(folded.optimizer_bytes, rel=1e-12)
    assert folded.weights_bytes - tp_wide.weights_bytes == pytest.approx(
        2 * (experts / 4 - experts / 8), rel=1e-12)


def _moe_layer(arch, **knobs):
    p = plan_arrays(pp=1, dp=8, cp=1, vp=1, zero=1, mb=1, recompute=0, global_batch=8,
                    **knobs)
    return layer_time(arch, DEVICE, FABRIC, p, seq_len=4096, kernels="fused", moe_layer=True)


def test_folded_experts_keep_their_flops_and_drop_their_tensor_parallel_collectives():
    """Qwen3-30B-A3B, TP 2 with sequence parallelism, EP 4. Folded, each rank sends half the
    tokens to whole experts: the expert GEMMs do the same work per rank; the MoE block's TP
    all-gather / reduce-scatter vanish (the attention block's stay); the dispatch and
    combine bytes halve."""
    arch = load_model("qwen3-30b-a3b")
    knobs = dict(tp=2, ep=4, sp=1)
    wide, folded = _moe_layer(arch, etp=2, **knobs), _moe_layer(arch, etp=1, **knobs)
    assert wide.tp_comm_total == pytest.approx(2 * folded.tp_comm_total, rel=1e-12)
    assert folded.tp_comm_total > 0
    # EP 4 inside one node either way (stride 2, then 1): the bandwidth part halves
    latency = 2 * 2 * 3 * FABRIC.intra_latency_s
    assert folded.ep_comm - latency == pytest.approx(0.5 * (wide.ep_comm - latency),
                                                     rel=1e-12)
    # kernel time moves only through the GEMM shapes, not the FLOPs: within 10 %
    assert folded.forward == pytest.approx(wide.forward, rel=0.10)


def test_scenario_pins_reach_the_folded_plans():
    """A pin of tp 2 and ep 64 on 512 GPUs leaves DP 32: only folded plans run, and the
    planner finds them; pinning etp = tp instead says what rules everything out."""
    def scenario(pin):
        return TrainScenario.model_validate({
            "model": "deepseek-v3", "top": 5, "pin": {"tp": 2, "pp": 8, "ep": 64, **pin},
            "hardware": {"gpus": ["h100"], "counts": [512]},
            "training": {"tokens": 1e12, "global_batch": 4096, "seq_len": 4096,
                         "precision": "fp8"}})

    best = plan_training(scenario({})).best
    assert best and all(p.plan.expert_tp == 1 and p.plan.dp * p.plan.cp == 32 for p in best)
    assert plan_training(scenario({"etp": 1})).best[0].plan == best[0].plan
    with pytest.raises(InputError, match=r"ep must divide dp\*cp \(32 here\).*set etp=1"):
        plan_training(scenario({"etp": 2}))


def test_unfolded_plans_are_unchanged_by_the_knob():
    """etp = tp is the plan as it was: the same step for a plan given with and without it."""
    arch = load_model("mixtral-8x7b")
    job = TrainingJob(seq_len=4096, global_batch=64)
    plan = ParallelPlan(tp=2, dp=8, ep=4, zero=1, sequence_parallel=True, micro_batch=1)
    a, b = (evaluate_plan(arch, "h100", job, p) for p in (plan, replace(plan, etp=2)))
    assert a.step_s == b.step_s and a.breakdown_s == b.breakdown_s
    assert np.isfinite(evaluate_plan(arch, "h100", job, replace(plan, etp=1)).step_s)


def test_the_report_says_what_folding_won_by():
    """Mixtral 8x7B on 16 H100s at TP 2: the folded plan wins, and the reasons name what
    the best unfolded plan loses on; a dense model has no such line."""
    def rejected(model):
        return plan_training(TrainScenario.model_validate({
            "model": model, "top": 1, "pin": {"tp": 2},
            "hardware": {"gpus": ["h100"], "counts": [16]},
            "training": {"tokens": 1e10, "global_batch": 128, "seq_len": 4096}})).rejected

    lines = [r for r in rejected("mixtral-8x7b") if r.startswith("expert folding")]
    assert len(lines) == 1 and lines[0].startswith("expert folding (ETP < TP)=off: +")
    assert not any("expert folding" in r for r in rejected("llama-3.1-8b"))


@pytest.mark.parametrize("pin, message", [
    ({"etp": 3}, "etp=3 must divide moe_intermediate_size=14336 and tp, and no tp mixtral-8x7b "
                 "can run (1, 2, 4, 8, 16, 32) is a multiple of it. To fix: use etp in 1, 2, "
                 "4, 8, 16, 32"),
    ({"etp": 64}, "no tp mixtral-8x7b can run (1, 2, 4, 8, 16, 32) is a multiple of it. To "
                  "fix: use etp in 1, 2, 4, 8, 16, 32"),
    ({"etp": 16, "tp": 8}, "etp=16 must divide moe_intermediate_size=14336 and tp, and the "
                           "pinned tp=8 is not a multiple of it. To fix: use etp in 1, 2, 4, 8"),
])
def test_a_pinned_etp_that_cannot_work_is_offered_only_values_that_can(pin, message):
    """Audit b55: Mixtral with pin {etp: 3} was told 'use etp in 1, 2, 4, 7, 8, 14, ...' (the
    divisors of the experts' width); 7 then failed, since etp divides tp and tp the 32
    heads. etp 64 read 'etp=64 must divide tp=1', a tp nobody pinned."""
    scenario = TrainScenario.model_validate({
        "model": "mixtral-8x7b", "pin": pin, "hardware": {"gpus": ["h100"], "counts": [64]},
        "training": {"tokens": 1e11, "global_batch": 256, "seq_len": 4096}})
    with pytest.raises(InputError) as error:
        plan_training(scenario)
    assert str(error.value).endswith(message)
    for etp in (1, 2, 4, 8):  # each value offered runs
        assert plan_training(scenario.model_copy(update={"pin": scenario.pin.model_copy(
            update={"etp": etp})})).best


def test_a_plans_etp_fix_divides_both_its_tp_and_the_experts_width():
    arch = load_model("mixtral-8x7b")
    with pytest.raises(PlanError, match=r"etp=3 does not divide moe_intermediate_size=14336 "
                                        r"of mixtral-8x7b\. To fix: use etp in 1, 2, 4, 8$"):
        check_plan(arch, ParallelPlan(tp=8, etp=3, ep=8, dp=8), seq_len=4096)
