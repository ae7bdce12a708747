"""plan train's input checks and how its results name what they report: a run shorter than
one step, fp8 without fp8 tensor cores, sequences past the model's positions, the memory
capacity the fit check uses, and which energy is IT-only."""

from __future__ import annotations

import pytest

from infraplan.catalog import accelerator
from infraplan.errors import InputError
from infraplan.models import load_model
from infraplan.physics.memory.training import MemoryOptions
from infraplan.report.training import plans_table
from infraplan.training.evaluate import TrainingJob, evaluate_plan
from infraplan.training.memory import training_memory
from infraplan.training.plan import ParallelPlan
from infraplan.training.plan_train import plan_training
from infraplan.units import GiB
from infraplan.workloads import TrainScenario


def _scenario(model="mistral-7b", gpu="h100", counts=(8,), **training) -> TrainScenario:
    return TrainScenario.model_validate({
        "model": model, "top": 2, "hardware": {"gpus": [gpu], "counts": list(counts)},
        "training": {"tokens": 1e10, "global_batch": 64, "seq_len": 4096, **training}})


@pytest.mark.parametrize("training, per_step", [
    ({"tokens": 1}, "64 x 4,096 = 262,144 tokens"),
    ({"global_batch": 1_000_000_000}, "1,000,000,000 x 4,096 = 4,096,000,000,000 tokens"),
])
def test_a_run_shorter_than_one_step_is_refused(training, per_step):
    """tokens: 1 printed 'time to train 0.0 d' beside a 28 s step; a global batch of 1e9
    sequences, a 14-year step and 17.3 days to train."""
    with pytest.raises(InputError) as info:
        plan_training(_scenario(**training))
    message = str(info.value)
    assert "training.tokens = " in message and "is less than one optimizer step" in message
    assert f"training.global_batch x training.seq_len = {per_step}" in message
    assert "To fix: give training.tokens >= " in message
    just_one = TrainingJob(seq_len=4096, global_batch=64, tokens=64 * 4096)  # one step: fine
    assert just_one.tokens == 262_144


def test_a_node_type_of_another_accelerator_is_refused():
    """gpus: [h100] with system: dgx-a100 planned H100s on a DGX A100's NVLink and NICs
    without a word (serving's deployment already refused it)."""
    scenario = _scenario(gpu="h100")
    scenario = scenario.model_copy(update={"hardware": scenario.hardware.model_copy(
        update={"system": "dgx-a100"})})
    with pytest.raises(InputError, match=r"node type 'dgx-a100-320gb' holds a100-sxm4-40gb, "
                       r"not h100-sxm5-80gb\. To fix: plan a100-sxm4-40gb on it, or pick a "
                       r"node type that holds h100-sxm5-80gb \(dgx-h100, "):
        plan_training(scenario)


@pytest.mark.parametrize("gpu, precision, has", [("v100-sxm2-32gb", "fp8", "fp16 or fp32"),
                                                 ("a100-sxm4-80gb", "fp8", "bf16 or fp16 or fp32"),
                                                 ("t4", "bf16", "fp16 or fp32")])
def test_training_needs_tensor_cores_of_its_precision(gpu, precision, has):
    """fp8 was accepted at the 16-bit peak: MFU 48.7 % on a V100, which has no fp8 tensor
    cores. bf16 on a T4 was refused without naming the field or the precisions it has
    ('t4 has no peak FLOP/s for bf16. To fix: use one of fp64, fp32, ...')."""
    with pytest.raises(InputError) as info:
        plan_training(_scenario(model="llama-3.1-8b", gpu=gpu, precision=precision))
    message = str(info.value)
    name = accelerator(gpu).name
    assert message.startswith(f"{name} has no peak FLOP/s for {precision!r} (it has "
                              f"{', '.join(accelerator(gpu).peak_flops)}): {precision} "
                              f"training needs {precision} tensor cores")
    assert f"To fix: set training.precision to {has}; or remove {name} from the " \
           f"accelerators, or use one with {precision} (h100-sxm5-80gb" in message
    with pytest.raises(InputError, match=f"no peak FLOP/s for '{precision}'"):
        evaluate_plan(load_model("llama-3.1-8b"), gpu,
                      TrainingJob(seq_len=4096, global_batch=8, precision=precision),
                      ParallelPlan(tp=8))
    fp8 = plan_training(_scenario(model="llama-3.1-8b", precision="fp8"))  # H100: has fp8
    assert fp8.best[0].mfu > 0


def test_accelerators_without_the_precision_are_left_out_of_a_mixed_search():
    """gpus: [v100, t4, a100] in bf16 was refused whole, for the V100 alone."""
    scenario = TrainScenario.model_validate({
        "model": "megatron-gpt-1.7b", "hardware": {"gpus": ["v100", "t4", "a100"],
                                                   "counts": [32]},
        "training": {"tokens": 1e10, "global_batch": 512, "seq_len": 2048,
                     "precision": "bf16"}})
    result = plan_training(scenario)
    assert {p.accelerator for p in result.best + result.by_accelerator} == {"a100-sxm4-80gb"}
    assert result.notes[:2] == [
        f"{name} is left out: it has no bf16 tensor cores for bf16 training (set "
        "training.precision to fp16 or fp32 to plan it)" for name in ("v100-sxm2-32gb", "t4")]
    fp8 = plan_training(scenario.model_copy(update={
        "hardware": scenario.hardware.model_copy(update={"gpus": ("a100", "h100")}),
        "training": scenario.training.model_copy(update={"precision": "fp8"})}))
    assert {p.accelerator for p in fp8.by_accelerator} == {"h100-sxm5-80gb"}
    assert fp8.notes[0].startswith("a100-sxm4-80gb is left out: it has no fp8 tensor cores")


def test_without_a_precision_each_accelerator_trains_in_its_16_bit_type():
    """The default precision was bf16, so gpus: [v100, a100] left the V100 out and a V100
    alone was refused; without training.precision each chip now trains in bf16, or in fp16
    where it has no bf16 tensor cores, and the plans say which."""
    scenario = TrainScenario.model_validate({
        "model": "megatron-gpt-1.7b", "hardware": {"gpus": ["v100", "t4", "a100"],
                                                   "counts": [32]},
        "training": {"tokens": 1e10, "global_batch": 512, "seq_len": 2048}})
    result = plan_training(scenario)
    by_gpu = {p.accelerator: p for p in result.by_accelerator}
    assert {g: p.precision for g, p in by_gpu.items()} == {
        "v100-sxm2-32gb": "fp16", "t4": "fp16", "a100-sxm4-80gb": "bf16"}
    assert result.notes[:2] == [
        f"{name} trains in fp16: it has no bf16 tensor cores (training.precision is not "
        "set; fp16 needs loss scaling)" for name in ("v100-sxm2-32gb", "t4")]
    # each plan is the one its precision gives: the same plan pinned to that precision
    for gpu, plan in by_gpu.items():
        job = TrainingJob(seq_len=2048, global_batch=512, tokens=1e10,
                          precision=plan.precision)
        pinned = evaluate_plan(load_model("megatron-gpt-1.7b"), gpu, job, plan.plan)
        assert pinned.step_s == plan.step_s and pinned.memory_bytes == plan.memory_bytes
    assert by_gpu["v100-sxm2-32gb"].to_json()["precision"] == "fp16"


def test_the_time_to_train_says_the_run_goodput_it_divides_by():
    """'(with run goodput)' left the reader to guess a 10% charge on every plan."""
    from infraplan.physics.hardware import calibration
    from infraplan.report.training import breakdown

    best = plan_training(_scenario(tokens=1e10)).best[0]
    text = breakdown(best)
    assert f"(with {calibration('run-goodput'):.0%} run goodput: restarts, checkpoints, " \
           "evaluation)" in text
    assert best.time_to_train_s == pytest.approx(
        1e10 / best.tokens_per_s / calibration("run-goodput"), rel=1e-12)


def test_plan_train_notes_a_seq_len_past_the_models_positions():
    """memory noted gpt2 at 8,192 tokens (1,024 positions); plan train said nothing."""
    note = "seq_len 8192 exceeds the model's max_position_embeddings 1024"
    result = plan_training(_scenario(model="gpt2", seq_len=8192, tokens=1e9))
    assert note in result.notes and note in result.to_json()["notes"]
    report = training_memory("gpt2", "h100", ParallelPlan(), MemoryOptions(seq_len=8192))
    assert note in report.notes  # the same words as memory
    assert not any("max_position_embeddings" in n
                   for n in plan_training(_scenario(model="gpt2", seq_len=1024)).notes)


def test_memory_capacity_and_it_energy_are_named_as_checked():
    """The table showed '79.2/80' for an H100 whose allocatable 79.65 GiB the fit check
    uses (errors say 79.6 GiB); best[].energy_kwh (GPUs at TDP) sat beside
    economics.energy_kwh (host and PUE included) under the same name."""
    result = plan_training(_scenario())
    best = result.best[0]
    assert best.capacity_bytes == accelerator("h100").memory_bytes == 85_520_809_984
    assert f"{best.memory_bytes / GiB:.1f}/79.6" in plans_table(result.best)
    data = best.to_json()
    assert "energy_kwh" not in data
    assert data["economics"]["energy_kwh"] > data["it_energy_kwh"]  # + host, x PUE
    assert data["it_energy_kwh"] == pytest.approx(
        best.time_to_train_s * 8 * accelerator("h100").tdp_watts / 3.6e6)


def test_expert_all_to_all_overlap_is_asked_for_not_assumed():
    """The all-to-all overlap needs Megatron-Core >= 0.14 (or DualPipe) and rules out full
    recompute: a scenario that says nothing plans without it, `auto` searches both, `true`
    keeps only plans that can run it, and a dense model cannot ask for it."""
    def scenario(model, pin):
        return TrainScenario.model_validate({
            "model": model, "top": 50, "pin": pin,
            "hardware": {"gpus": ["h100"], "counts": [16]},
            "training": {"tokens": 1e10, "global_batch": 128, "seq_len": 4096}})

    def plans(pin):
        return plan_training(scenario("mixtral-8x7b", pin)).best

    assert not any(p.plan.ep_comm_overlap for p in plans({}))
    on = plans({"ep_comm_overlap": True})
    assert on and all(p.plan.ep_comm_overlap and p.plan.ep > 1 and p.plan.recompute != "full"
                      and (p.plan.pp == 1 or p.plan.vp > 1) for p in on)
    both = plans({"ep_comm_overlap": "auto"})
    assert {p.plan.ep_comm_overlap for p in both} == {True, False}
    assert both[0].step_s <= min(p.step_s for p in on)
    with pytest.raises(InputError, match="has no experts"):
        plan_training(scenario("mistral-7b", {"ep_comm_overlap": True}))



def test_a_misspelt_all_to_all_overlap_names_yaml_spellings(tmp_path, capsys):
    import yaml

    from infraplan.cli import main

    path = tmp_path / "moe.yaml"
    path.write_text(yaml.safe_dump({
        "model": "mixtral-8x7b", "pin": {"ep_comm_overlap": "sometimes"},
        "hardware": {"gpus": ["h100"], "counts": [16]},
        "training": {"tokens": 1e10, "global_batch": 128, "seq_len": 4096}}))
    assert main(["plan", "train", str(path)]) == 2
    assert "pin.ep_comm_overlap must be one of 'true', 'false', 'auto' (got 'sometimes')" \
        in capsys.readouterr().err


def test_an_uneven_pipeline_split_is_named_with_the_flag_that_places_it():
    """80 layers in 4 stages x 16 chunks hold 1 or 2 layers each, which Megatron-Core's
    default split refuses; the plan says so. Even splits (4 x 10) and no pipeline say
    nothing."""
    note = ParallelPlan(pp=4, vp=16, dp=1).uneven_layout_note(80)
    assert note == ("PP=4x16 splits the 80 layers unevenly (4 stages x 16 chunks of 1 or 2 "
                    "layers): give Megatron-Core the split with "
                    "--pipeline-model-parallel-layout; the largest chunk sets the pipeline "
                    "bubble")
    assert "16 stages of 7 or 8 layers" in ParallelPlan(pp=16, dp=1).uneven_layout_note(126)
    assert ParallelPlan(pp=4, vp=10, dp=1).uneven_layout_note(80) is None
    assert ParallelPlan(pp=1, dp=8).uneven_layout_note(79) is None
    pinned = TrainScenario.model_validate({
        "model": "llama-3.1-70b", "top": 1, "hardware": {"gpus": ["h100"], "counts": [64]},
        "training": {"tokens": 1e10, "global_batch": 64, "seq_len": 4096},
        "pin": {"pp": 4, "vp": 16}})
    assert f"best plan: {note}" in plan_training(pinned).notes


def test_the_memory_check_names_an_uneven_split_too():
    options = MemoryOptions(seq_len=8192)
    report = training_memory("llama-3.1-405b", "h100", ParallelPlan(tp=8, pp=16, dp=8),
                             options)
    assert ParallelPlan(tp=8, pp=16, dp=8).uneven_layout_note(126) in report.notes
    even = training_memory("llama-3.1-70b", "h100", ParallelPlan(tp=8, pp=4, dp=2), options)
    assert not any("unevenly" in n for n in even.notes)


def test_the_node_type_and_network_each_accelerator_was_planned_on_are_named():
    """The GH200's only catalog node is a one-GPU cloud VM on 10 GbE: its plans spent most
    of the step in the data-parallel sync at 9 % MFU, and nothing said which node the
    planner had assumed."""
    def scenario(**hardware):
        return TrainScenario.model_validate({
            "model": "llama-3.1-8b", "top": 1,
            "hardware": {"gpus": ["gh200-96gb", "h100"], "counts": [16], **hardware},
            "training": {"tokens": 1e10, "global_batch": 64, "seq_len": 4096}})

    notes = plan_training(scenario()).notes
    nodes = [n for n in notes if n.startswith("node types: ")]
    assert len(nodes) == 1
    assert "gh200-96gb on lambda-gpu-1x-gh200 (1 per node; 1 x ethernet-10g 10 Gb/s" in nodes[0]
    assert "h100-sxm5-80gb on dgx-h100 (8 per node, nvswitch 450 GB/s; 8 x ib-ndr-400 400" \
        in nodes[0]
    bound = [n for n in notes if n.startswith("network-bound: ")]
    assert len(bound) == 1 and "gh200-96gb's best plan (16 GPUs, 1 per node" in bound[0]
    assert "h100" not in bound[0]
    fast = plan_training(scenario(network="ib-ndr-400")).notes
    assert not [n for n in fast if n.startswith("network-bound: ")]
    assert any("gh200-96gb on lambda-gpu-1x-gh200+ib-ndr-400-x1 (1 per node; 1 x ib-ndr-400"
               in n for n in fast)


def test_mfu_at_long_context_says_what_causal_kernels_execute():
    """At 1M tokens MFU counted attention over the whole sequence and read 83 % on A100s
    with nothing said; causal kernels execute about half of that count."""
    from infraplan.models.flops import training_flops_per_sequence

    arch = load_model("llama-3.1-8b")
    s = 1_048_576
    causal = training_flops_per_sequence(arch, s).model
    full = training_flops_per_sequence(arch, s, causal=False).model
    share = causal / full
    assert 0.5 < share < 0.52  # attention is most of the work: s(s+1)/2 of s^2 keys
    result = plan_training(TrainScenario.model_validate({
        "model": "llama-3.1-8b", "top": 1,
        "hardware": {"gpus": ["a100-sxm4-80gb"], "counts": [64]},
        "training": {"tokens": 1e10, "global_batch": 8, "seq_len": s}}))
    mfu = result.best[0].mfu
    assert mfu > 0.7  # the convention's count
    note = [n for n in result.notes if "causal kernels run" in n]
    assert note == [f"MFU and HFU count attention over the whole sequence (PaLM App. B, "
                    f"Narayanan et al. 2021), as published MFUs do; causal kernels run "
                    f"{share:.0%} of that work at seq_len 1,048,576, so the best plan's "
                    f"{mfu:.1%} MFU is {mfu * share:.1%} of peak executed"]
    short = plan_training(_scenario(model="llama-3.1-8b", seq_len=8192))
    assert not [n for n in short.notes if "causal kernels run" in n]


def test_an_accelerator_with_no_plan_that_fits_is_named_not_dropped():
    """gpus [h100, t4]: T4 vanished from the comparison (by_accelerator held H100 alone,
    no note), while T4 alone was refused with its reason."""
    scenario = TrainScenario.model_validate({
        "model": "llama-3.1-8b", "hardware": {"gpus": ["h100", "t4"], "counts": [8]},
        "training": {"tokens": 1e11, "global_batch": 256, "seq_len": 4096}})
    result = plan_training(scenario)
    assert [p.accelerator for p in result.by_accelerator] == ["h100-sxm5-80gb"]
    (note,) = [n for n in result.notes if n.startswith("t4 left out")]
    with pytest.raises(InputError) as alone:
        plan_training(scenario.model_copy(update={"hardware": scenario.hardware.model_copy(
            update={"gpus": ("t4",)})}))
    assert note == f"t4 left out: {alone.value.message}"
    assert "needs 16.1 GiB per accelerator, t4 has 15.0 GiB" in note
