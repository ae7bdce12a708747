"""The plan search: it never returns a plan that does not fit, it honours pins, its
frontier is Pareto-optimal, and two scenarios reproduce their golden outputs."""

from __future__ import annotations

import json
import os
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from infraplan.catalog import accelerator, load_catalog
from infraplan.errors import InputError
from infraplan.models import load_model
from infraplan.training.evaluate import TrainingJob
from infraplan.training.plan import ParallelPlan, PlanError, check_plan
from infraplan.training.plan_train import gpu_counts, plan_training
from infraplan.training.search import search
from infraplan.training.space import VIRTUAL_STAGES, Knobs, build_space, default_vp
from infraplan.units import GiB
from infraplan.scenario_files import load_scenario
from infraplan.workloads import TrainScenario
from tests.conftest import folded_text

GOLDEN = Path(__file__).parent / "golden"


@pytest.mark.parametrize("model, gpu, counts, seq", [
    ("llama-3.1-70b", "a100-sxm4-40gb", (16, 32), 4096),
    ("mixtral-8x7b", "h100", (8, 16), 8192),
    ("qwen2.5-7b", "l40s", (1, 2, 4, 8), 4096),
])
def test_every_returned_plan_fits(model, gpu, counts, seq):
    result = search(load_model(model), [gpu], Knobs(gpus=counts),
                    TrainingJob(seq_len=seq, global_batch=64, tokens=1e10), top=10)
    for plan in result.best + result.frontier + result.by_accelerator:
        assert plan.fits and plan.memory_bytes <= plan.capacity_bytes
    assert result.configs_evaluated >= result.fitting > 0
    steps = [p.step_s for p in result.best]
    assert steps == sorted(steps)


def test_frontier_is_pareto_optimal():
    result = search(load_model("llama-3.1-8b"), ["h100", "a100-sxm4-80gb"],
                    Knobs(gpus=(8, 16, 32, 64)),
                    TrainingJob(seq_len=4096, global_batch=256, tokens=1e11))
    points = [(p.time_to_train_s, p.gpu_hours) for p in result.frontier]
    assert len(points) >= 2
    for t, cost in points:
        assert not any(t2 <= t and c2 < cost or t2 < t and c2 <= cost for t2, c2 in points)
    assert [p.accelerator for p in result.by_accelerator] == ["h100-sxm5-80gb",
                                                               "a100-sxm4-80gb"]


@pytest.mark.parametrize("objective", ["time", "cost"])
def test_the_best_plan_is_the_frontier_end_its_objective_picks(objective):
    # 64 H100s at global batch 512 and 8 sequences a micro-batch: one micro-batch per
    # step, so ZeRO-1 and ZeRO-2 tie exactly on time and cost. The best plan and the
    # frontier's fastest (or cheapest) end must be one plan, not two equal ones.
    scenario = TrainScenario.model_validate({
        "model": "megatron-gpt-1.7b", "objective": objective, "prices": {"h100": 3.0},
        "training": {"tokens": 2e12, "global_batch": 512, "seq_len": 2048},
        "hardware": {"gpus": ["h100", "a100-sxm4-80gb"], "counts": [32, 64]}})
    result = plan_training(scenario)
    end = result.frontier[0 if objective == "time" else -1]
    assert result.best[0].plan == end.plan and result.best[0].accelerator == end.accelerator
    assert result.by_accelerator[0].plan == end.plan


def test_pins_are_honoured_and_impossible_pins_explained():
    arch = load_model("llama-3.1-70b")
    job = TrainingJob(seq_len=4096, global_batch=128)
    result = search(arch, ["h100"], Knobs(gpus=(64,), tp=(4,), zero=(1,)), job)
    assert all(p.plan.tp == 4 and p.plan.zero == 1 for p in result.best)
    with pytest.raises(InputError, match="no plan fits in memory"):
        search(arch, ["h100"], Knobs(gpus=(8,), tp=(1,), pp=(1,), zero=(0,)), job)
    with pytest.raises(InputError, match="no runnable plan"):
        search(arch, ["h100"], Knobs(gpus=(8,), tp=(3,)), job)


@pytest.mark.parametrize("model, pins, fixes", [
    # TP, PP pinned and ZeRO-0: more GPUs add data-parallel replicas that each hold the
    # whole model, and CP is already at its widest; "allow more GPUs" was the first fix
    ("llama-3.1-70b", dict(tp=(1,), pp=(1,), zero=(0,)),
     "To fix: unpin pin.tp and pin.pp so that model parallelism may split the weights, or "
     "unpin pin.zero so that ZeRO-3 may shard the weights"),
    # a dense model has no experts to split: its pinned EP is no lever
    ("llama-3.1-70b", dict(tp=(1,), pp=(1,), zero=(0,), ep=(1,)),
     "To fix: unpin pin.tp and pin.pp so that model"),
    # the 1.7B model's states fit; its 256k-token activations need a CP wider than 8 GPUs
    ("megatron-gpt-1.7b", dict(tp=(1,), pp=(1,), zero=(0,), recompute=(0.0,),
                               seq_len=262144),
     "To fix: allow more GPUs than 8 (hardware.max_count, or hardware.counts), or unpin "
     "pin.tp and pin.pp"),
    ("mixtral-8x7b", dict(tp=(1,), pp=(1,), ep=(1,), zero=(0,)),
     "To fix: unpin pin.tp and pin.pp and pin.ep so that model parallelism"),
])
def test_when_nothing_fits_only_levers_that_shrink_the_plan_are_offered(model, pins, fixes):
    seq_len = pins.pop("seq_len", 4096)
    with pytest.raises(InputError) as info:
        search(load_model(model), ["h100"], Knobs(gpus=(8,), **pins),
               TrainingJob(seq_len=seq_len, global_batch=128))
    assert str(info.value).startswith("no plan fits in memory") and fixes in str(info.value)


def test_tp_comm_overlap_pinned_without_what_it_overlaps_is_refused():
    """It ended in 'no combination of the allowed degrees divides the GPU counts, heads and
    global batch'."""
    from infraplan.spec_checks import FieldError
    from infraplan.workloads import Pins

    for pins, got in ((dict(tp=1), "tp: 1"), (dict(sequence_parallel=False),
                                              "sequence_parallel: false")):
        with pytest.raises(ValueError) as info:
            Pins.model_validate({"tp_comm_overlap": True, **pins})
        error = info.value.errors()[0]["ctx"]["error"]
        assert isinstance(error, FieldError) and error.field == "tp_comm_overlap"
        assert error.fix == f"remove pin.tp_comm_overlap, or the pin {got}"
    assert Pins.model_validate({"tp_comm_overlap": True, "tp": 2}).tp_comm_overlap


@pytest.mark.parametrize("model, pins, reason", [
    ("llama-3.1-70b", dict(tp=(3,)), "tp=3 does not divide the 64 attention heads"),
    ("llama-3.1-70b", dict(tp=(16,), pp=(1,), cp=(1,)),
     "tp=16 x pp=1 x cp=1 leaves no whole data-parallel degree"),
    ("llama-3.1-70b", dict(pp=(100,)), "pp=100 exceeds the 80 layers"),
    ("llama-3.1-70b", dict(cp=(3,)), r"seq_len=4096 must be divisible by 2\*cp = 6 \(load-"
     r"balanced ring attention splits it in 2\*cp chunks\). To fix: use seq_len=4092 or 4098, "
     r"or cp in 1, 2, 4, 8, 16, 32, 64, 128$"),
    ("llama-3.1-70b", dict(ep=(4,)), "ep=4 but llama-3.1-70b has no experts"),
    ("mixtral-8x7b", dict(ep=(16,)), "ep=16 does not divide the 8 experts"),
    ("qwen3-30b-a3b", dict(ep=(16,)), r"ep=16: the experts shard over the ranks of one "
     r"pipeline stage, so ep must divide the GPU count \(8 here\). To fix: use ep in 1, 2, 4, "
     r"8, or allow a multiple of 16 GPUs$"),
    ("qwen3-30b-a3b", dict(ep=(8,), pp=(2,)), r"ep=8: .* so ep must divide GPUs / pp \(4 "
     r"here\). To fix: use ep in 1, 2, 4, or allow a multiple of 16 GPUs$"),
    ("llama-3.1-70b", dict(dp=(3,)), "dp=3: no TP x PP x CP split leaves it"),
    ("llama-3.1-70b", dict(micro_batch=(256,)),
     r"micro_batch=256: global_batch 128 is not a multiple of dp x micro_batch for any "
     r"data-parallel degree left \(1, 2, 4, 8\). To fix: pin micro_batch to one of 1, 2, 4, "
     r"8, 16, 32$"),
    ("llama-3.1-70b", dict(pp=(1,), vp=(2,)), "vp \\(virtual pipeline stages\\) > 1 needs pp > "
     "1. To fix: set pp > 1 with it, or vp=1$"),
    ("llama-3.1-70b", dict(tp=(4,), pp=(2,), vp=(2,), micro_batch=(128,)),
     "vp=2: interleaving needs the micro-batches per step"),
])
def test_an_impossible_pin_is_named(model, pins, reason):
    """Each said only 'no combination of the allowed degrees divides ...'; a pinned EP on a
    dense model even returned plans."""
    with pytest.raises(InputError, match="no runnable plan: " + reason):
        search(load_model(model), ["h100"], Knobs(gpus=(8,), **pins),
               TrainingJob(seq_len=4096, global_batch=128))


def test_why_a_value_lost_names_the_other_knobs_its_best_plan_changed():
    """'ZeRO=0: +11%, mostly compute' came with no word that the ZeRO-0 plan was also a
    deeper pipeline: each reason lists the knobs its plan sets apart from the best plan's,
    and only those."""
    result = search(load_model("llama-3.1-70b"), ["h100"], Knobs(gpus=(64,)),
                    TrainingJob(seq_len=4096, global_batch=256, tokens=1e10))
    best = result.best[0].plan
    attribute = {"TP": "tp", "PP": "pp", "DP": "dp", "CP": "cp", "ZeRO": "zero",
                 "micro-batch": "micro_batch"}
    withs = [r.split("; with ")[1] for r in result.rejected if "; with " in r]
    assert len(withs) >= 5, result.rejected
    checked = 0
    for clause in withs:
        for change in re.findall(r"(TP|PP|DP|CP|ZeRO|micro-batch)=(\d+)", clause):
            assert getattr(best, attribute[change[0]]) != int(change[1]), (clause, best)
            checked += 1
    assert checked >= 10


@pytest.mark.parametrize("model, counts", [("mixtral-8x7b", (8, 16, 64)),
                                           ("llama-3.1-70b", (16, 48, 64))])
def test_the_runnable_mask_is_the_same_on_its_factored_axes_as_on_the_flat_grid(model, counts):
    """The rules run over each inner knob's own axis (a 2x faster DeepSeek-V3 search); laid
    out flat again they must give the mask the rules give the flat grid, cell for cell, and
    every plan they keep must pass check_plan."""
    arch = load_model(model)
    space = build_space(arch, Knobs(gpus=counts), seq_len=4096, global_batch=96)
    rows = slice(0, space.outer_rows)
    flat = space._rules({k: v[:, None] for k, v in space.outer.items()},
                        {k: v[None, :] for k, v in space.inner.items()})
    flat = np.broadcast_to(flat, (space.outer_rows, len(space.inner["zero"])))
    factored = space._runnable(rows)
    assert factored.shape == flat.shape and 1000 < factored.sum() < factored.size
    assert (factored == flat).all()
    for plans, _ in space.chunks():
        for i in np.random.default_rng(0).choice(len(plans.tp), 300, replace=False):
            tp, etp = int(plans.tp[i]), int(plans.etp[i])
            plan = ParallelPlan(tp=tp, pp=int(plans.pp[i]), dp=int(plans.dp[i]),
                                cp=int(plans.cp[i]), ep=int(plans.ep[i]),
                                etp=None if etp == tp else etp, vp=int(plans.vp[i]),
                                zero=int(plans.zero[i]), micro_batch=int(plans.mb[i]),
                                sequence_parallel=bool(plans.sp[i]),
                                tp_comm_overlap=bool(plans.tp_overlap[i]))
            check_plan(arch, plan, seq_len=4096, global_batch=96)


def test_interleaving_needs_micro_batches_in_groups_of_pp():
    """Megatron-LM's interleaved schedule runs micro-batches through each model chunk in
    groups of pp; the search used to pick vp > 1 with 4 micro-batches on 8 stages."""
    arch = load_model("gpt3-175b")
    plan = ParallelPlan(tp=8, pp=8, dp=2, vp=3, micro_batch=4)
    with pytest.raises(PlanError, match="= 5, to be a multiple of pp=8"):
        check_plan(arch, plan, seq_len=2048, global_batch=40)
    assert check_plan(arch, plan, seq_len=2048, global_batch=64) == 8
    assert check_plan(arch, replace(plan, vp=1), seq_len=2048, global_batch=40) == 5
    result = search(arch, ["a100-sxm4-80gb"], Knobs(gpus=(128,), tp=(8,), pp=(8,)),
                    TrainingJob(seq_len=2048, global_batch=64), top=50)
    interleaved = [p.plan for p in result.best if p.plan.vp > 1]
    assert interleaved and all(64 // (p.dp * p.micro_batch) % 8 == 0 for p in interleaved)


def test_gpu_counts_are_whole_nodes_and_small_powers_of_two():
    assert gpu_counts(1, 32, 8) == (1, 2, 4, 8, 16, 24, 32)
    assert gpu_counts(64, 96, 8) == (64, 72, 80, 88, 96)
    with pytest.raises(InputError):
        gpu_counts(64, 32, 8)


def _summary(result) -> dict:
    def plan(p):
        return {"accelerator": p.accelerator, "gpus": p.plan.num_gpus,
                "plan": p.plan.describe(), "step_s": p.step_s,
                "breakdown_s": p.breakdown_s, "mfu": p.mfu,
                "time_to_train_s": p.time_to_train_s, "memory_bytes": p.memory_bytes}

    return {"configs_evaluated": result.configs_evaluated, "candidates": result.candidates,
            "fitting": result.fitting, "best": [plan(p) for p in result.best],
            "frontier": [plan(p) for p in result.frontier]}


@pytest.mark.parametrize("name", sorted(p.stem for p in GOLDEN.glob("*.yaml")))
def test_golden_scenarios(name):
    """Set INFRAPLAN_UPDATE_GOLDEN=1 to rewrite the expected outputs after a deliberate
    model change (and say why in the commit)."""
    scenario = load_scenario(GOLDEN / f"{name}.yaml", TrainScenario)
    got = _summary(plan_training(scenario))
    path = GOLDEN / f"{name}.json"
    if os.environ.get("INFRAPLAN_UPDATE_GOLDEN") == "1":
        path.write_text(json.dumps(got, indent=2, sort_keys=True) + "\n")
    expected = json.loads(path.read_text())
    assert got["configs_evaluated"] == expected["configs_evaluated"]
    assert got["fitting"] == expected["fitting"]
    for section in ("best", "frontier"):
        assert [p["plan"] for p in got[section]] == [p["plan"] for p in expected[section]]
        for g, e in zip(got[section], expected[section], strict=True):
            assert g["step_s"] == pytest.approx(e["step_s"], rel=1e-9)
            assert g["breakdown_s"] == pytest.approx(e["breakdown_s"], rel=1e-9, abs=1e-12)


def _scenario_70b_32_gpus(**hardware) -> TrainScenario:
    return TrainScenario.model_validate({
        "model": "llama-3.1-70b", "top": 1,
        "training": {"tokens": 1e12, "global_batch": 512, "seq_len": 4096},
        "hardware": {"gpus": ["h100"], "counts": [32], **hardware}})


def test_a_slower_network_never_speeds_a_plan_up():
    from infraplan.physics import hardware
    ib = plan_training(_scenario_70b_32_gpus()).best[0]
    eth = plan_training(_scenario_70b_32_gpus(network="ethernet-100g", nics_per_node=1)).best[0]
    # 8 x 400 Gb/s InfiniBand vs one 100 GbE port per node: 32x less scale-out bandwidth
    ib_fab = hardware.fabric(hardware.cluster("h100"))
    eth_fab = hardware.fabric(hardware.cluster("h100", hardware.with_network(
        "dgx-h100", "ethernet-100g", 1)))
    assert eth_fab.inter_bytes_per_s == pytest.approx(100e9 / 8 / 8 * 0.9)
    assert ib_fab.intra_bytes_per_s == eth_fab.intra_bytes_per_s
    assert eth.step_s > ib.step_s
    # the planner keeps data-parallel traffic inside the nodes it cannot leave cheaply
    assert eth.breakdown_s["dp_comm"] < 0.05 * eth.step_s


def test_nics_without_a_network_is_explained():
    with pytest.raises(InputError, match="nics_per_node needs hardware.network"):
        plan_training(_scenario_70b_32_gpus(nics_per_node=2))
    # an unknown network is refused when the scenario is read, naming its field
    from infraplan.scenario_files import parse_spec

    raw = _scenario_70b_32_gpus().model_dump(exclude_unset=True)
    raw["hardware"]["network"] = "ethernet-100"
    with pytest.raises(InputError, match=r"^s\.yaml: hardware\.network unknown network "
                                         r"'ethernet-100'; did you mean 'ethernet-100g'"):
        parse_spec(raw, TrainScenario, "s.yaml")


def test_chunked_evaluation_changes_nothing_and_drives_the_progress_bar(monkeypatch):
    """The space is expanded and evaluated a bounded chunk at a time: tiny chunks give the
    same plans, frontier, reasons and counts as one chunk, and the progress ticks run up
    through the GPU counts."""
    from infraplan.training import space as space_module

    scenario = _scenario_70b_32_gpus().model_copy(update={"top": 3})
    scenario = scenario.model_copy(update={"hardware": scenario.hardware.model_copy(
        update={"counts": (16, 32, 64, 128)})})
    monkeypatch.setattr(space_module, "CHUNK_PLANS", 1 << 30)
    whole = plan_training(scenario)
    monkeypatch.setattr(space_module, "CHUNK_PLANS", 997)
    ticks = []
    chunked = plan_training(scenario, progress=lambda done, total: ticks.append((done, total)))

    def summary(r):
        return ([(p.describe(), p.plan.num_gpus, p.step_s) for p in r.best],
                [(p.describe(), p.step_s) for p in r.frontier], r.rejected,
                r.configs_evaluated, r.candidates, r.fitting)

    assert summary(chunked) == summary(whole)
    assert len(ticks) > 4 and ticks[-1] == (4, 4)
    assert [d for d, _ in ticks] == sorted(d for d, _ in ticks)


def test_the_readme_sizes_the_benchmark_space_as_it_is():
    """benchmarks/search_throughput.py's space (GPT-3 175B, A100, 8 to 1024 GPUs): the README
    quotes its candidates and the plans left to evaluate; a pruning change must update it."""
    job = TrainingJob(seq_len=2048, global_batch=1536, precision="bf16", tokens=300e9)
    result = search(load_model("gpt3-175b"), ["a100-sxm4-80gb"],
                    Knobs(gpus=tuple(range(8, 1025, 8))), job)
    quoted = re.search(r"(\d+\.\d) million runnable plans out of (\d+) million candidates",
                       folded_text())
    assert quoted, "the README no longer sizes the benchmark's space"
    assert result.candidates >= 1_000_000  # the floor for the benchmark
    assert (float(quoted[1]), int(quoted[2])) == (round(result.configs_evaluated / 1e6, 1),
                                                  round(result.candidates / 1e6))


def test_no_plan_fills_two_top_slots():
    """Worked example 4 listed 'TP=1 PP=1 DP=64 ZeRO-1 mb=8 recompute=selective' twice: the
    'auto' recompute knob resolved to selective (no layer fully recomputed) is the selective
    plan again. ZeRO-1/2/3 over one data-parallel rank were ZeRO-0 under other names."""
    job = TrainingJob(seq_len=2048, global_batch=512, tokens=2e12)
    result = search(load_model("megatron-gpt-1.7b"), ["h100"], Knobs(gpus=(64,)), job, top=40)
    shown = [(p.accelerator, p.plan.describe()) for p in result.best]
    assert len(shown) == 40 and len(set(shown)) == 40
    one_rank = search(load_model("llama-3.1-8b"), ["h100"], Knobs(gpus=(8,), tp=(8,)),
                      TrainingJob(seq_len=4096, global_batch=64), top=20).best
    assert one_rank and {p.plan.zero for p in one_rank} == {0}
    assert len({p.plan.describe() for p in one_rank}) == len(one_rank)
    pinned = search(load_model("llama-3.1-8b"), ["h100"], Knobs(gpus=(8,), tp=(8,), zero=(1,)),
                    TrainingJob(seq_len=4096, global_batch=64)).best
    assert pinned and all(p.plan.zero == 1 and p.plan.dp == 1 for p in pinned)


def test_a_batch_no_split_divides_gets_batches_and_counts_that_run():
    """24 GPUs leave only data-parallel degrees with a factor 3, which a global batch of 100
    lacks; the message used to be the generic 'no combination ... divides'. Each suggested
    batch and GPU count must then run."""
    arch, job = load_model("llama-3.1-8b"), TrainingJob(seq_len=4096, global_batch=100)
    with pytest.raises(InputError, match=r"global_batch 100 is not a multiple of dp x "
                       r"micro_batch for any data-parallel degree the allowed splits leave "
                       r"\(3, 6, 12, 24\)\. To fix: set training.global_batch to 99 or 102, "
                       r"or allow 20 or 25 GPUs \(hardware.counts\)"):
        search(arch, ["h100"], Knobs(gpus=(24,)), job)
    for batch in (99, 102):
        assert search(arch, ["h100"], Knobs(gpus=(24,)),
                      replace(job, global_batch=batch)).best
    for count in (20, 25):
        assert search(arch, ["h100"], Knobs(gpus=(count,)), job).best


def test_nothing_fits_names_the_smallest_plan_and_only_the_levers_left():
    """The message used to offer 'recompute, ZeRO or a larger accelerator' whatever the
    plan already used; now it names the smallest plan, offers unpinning only a pinned ZeRO
    stage or recompute, and accelerators that hold that plan."""
    arch, job = load_model("llama-3.1-70b"), TrainingJob(seq_len=4096, global_batch=64)
    pinned = Knobs(gpus=(8,), zero=(1,), recompute=(1.0,))  # 1.0: selective
    with pytest.raises(InputError) as pinned_error:
        search(arch, ["h100"], pinned, job)
    message = str(pinned_error.value)
    need = float(re.search(r"needs ([\d.]+) GiB", message).group(1))
    assert "ZeRO-1" in message and "recompute=selective" in message
    assert "unpin pin.zero" in message and "unpin pin.recompute" in message
    named = re.search(r"GiB or more \(([^)]*)\)", message).group(1).split(", ")
    assert named and all(accelerator(n).memory_bytes / GiB >= need for n in named)
    with pytest.raises(InputError) as free_error:
        search(arch, ["h100"], Knobs(gpus=(1,)), job)
    assert "unpin" not in str(free_error.value)
    assert "allow more GPUs than 1" in str(free_error.value)


def test_a_plan_too_large_for_every_accelerator_offers_no_cpu_host():
    """GPT-3 175B on 8 T4 needs 327 GiB a device: the fix named the 512 GiB cpu-server
    (host memory, no accelerator) as 'an accelerator with 328 GiB or more'."""
    arch, job = load_model("gpt3-175b"), TrainingJob(seq_len=2048, global_batch=1536)
    with pytest.raises(InputError) as error:
        search(arch, ["t4"], Knobs(gpus=(8,)), job)
    message = str(error.value)
    need = float(re.search(r"needs ([\d.]+) GiB", message).group(1))
    assert need > max(a.memory_bytes / GiB for a in load_catalog().accelerators
                      if a.form_factor != "cpu")
    assert "cpu-server" not in message and "GiB or more" not in message
    assert message.endswith("To fix: allow more GPUs than 8 (hardware.max_count, or "
                            "hardware.counts)")


def test_virtual_stages_include_the_counts_that_split_a_stage_evenly():
    """80 layers in 4 stages: 20 per stage, so 5 and 10 chunks split it evenly where the
    usual 12 and 16 leave chunks of 1 or 2 layers (and the bubble of a 2-layer chunk). The
    search offers them, up to the usual largest count."""
    arch = load_model("llama-3.1-70b")
    assert set(default_vp(arch, (4,))) == set(VIRTUAL_STAGES) | {5, 10}
    assert set(default_vp(arch, (1, 3))) == set(VIRTUAL_STAGES)  # no pipeline, or uneven
    job = TrainingJob(seq_len=8192, global_batch=512)
    knobs = Knobs(gpus=(2048,), tp=(2,), pp=(4,), cp=(2,), zero=(1,), micro_batch=(1,),
                  recompute=(0.0,), sequence_parallel=(1,), tp_overlap=(1,))
    best = search(arch, ["h100"], knobs, job, top=1).best[0].plan
    assert (best.pp, best.vp) == (4, 10)


def test_the_search_keeps_fitting_plans_compactly_and_answers_as_if_it_kept_all(monkeypatch):
    """Audit s26 (DeepSeek-V3 on 3 GPU types, 1,024-2,048 GPUs): 27 million plans held as
    21 float64 columns peaked at 6.3 GB. A search now keeps the plans that fit (int32
    knobs) and, of the others, the least memory of each knob value: the results, reasons
    and notes are those of keeping every plan."""
    from infraplan.training import evaluated, search as search_module

    arch = load_model("llama-3.1-70b")
    job = TrainingJob(seq_len=4096, global_batch=512, tokens=1e12)
    knobs = Knobs(gpus=(8, 16))
    ev, _, count = search_module._evaluate_gpu(arch, "h100", job, knobs, None)
    fits = int(ev.out["fits"].sum())
    assert 0 < fits < count and len(ev.out["fits"]) <= fits + 200
    assert ev.cols["tp"].dtype == np.int32 and ev.out["capacity_bytes"].strides == (0,)
    compact = search(arch, ["h100", "a100-sxm4-40gb"], knobs, job, top=5)

    def keep_all(cols, out):  # the columns as the search used to keep them
        return dict(cols), {k: v for k, v in out.items() if k in (
            *evaluated.KEPT_COLUMNS, "gpus", "capacity_bytes")}

    monkeypatch.setattr(search_module, "kept_rows", keep_all)
    full = search(arch, ["h100", "a100-sxm4-40gb"], knobs, job, top=5)
    assert (compact.configs_evaluated, compact.fitting) == (full.configs_evaluated,
                                                            full.fitting)
    for got, want in ((compact.best, full.best), (compact.frontier, full.frontier)):
        assert [(p.accelerator, p.plan, p.step_s) for p in got] == \
            [(p.accelerator, p.plan, p.step_s) for p in want]
    assert compact.rejected == full.rejected and compact.notes == full.notes
    # reasons and notes read from the plans that do not fit: what the compact rows keep
    assert "ZeRO=1: does not fit (at least 83.4 GiB of 79.6 GiB)" in compact.rejected
    assert compact.notes == ["a100-sxm4-40gb left out: no plan fits in memory: the smallest "
                             "(TP=16 PP=1 DP=1 ZeRO-0 mb=1 recompute=full SP) needs 67.0 GiB "
                             "per accelerator, a100-sxm4-40gb has 40.0 GiB"]
