"""Scenario files: random corruption never crashes, and the does-not-fit advice is sound."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infraplan.errors import InputError
from infraplan.physics.memory.training import MemoryOptions
from infraplan.training.memory import (memory_for_scenario, min_gpus_for_states, suggest_fixes,
                                       training_memory)
from infraplan.training.plan import ParallelPlan
from infraplan.scenario_files import apply_overrides, parse_spec
from infraplan.workloads import MemoryScenario

VALID = {"model": "llama-3.1-8b", "hardware": {"gpu": "h100", "num_gpus": 8},
         "training": {"seq_len": 4096, "global_batch": 64},
         "parallelism": {"tp": 2, "zero": 1, "recompute": "selective"},
         "finetune": {"method": "full"}}
PATHS = ["model", "hardware.gpu", "hardware.num_gpus", "training.seq_len",
         "training.global_batch", "training.precision", "training.optimizer",
         "training.grad_dtype", "training.kernels", "parallelism.tp", "parallelism.pp",
         "parallelism.dp", "parallelism.cp", "parallelism.ep", "parallelism.vp",
         "parallelism.zero", "parallelism.micro_batch", "parallelism.recompute",
         "parallelism.sequence_parallel", "finetune.method", "finetune.lora_rank",
         "finetune.lora_targets", "training.typo", "extra"]
JUNK = st.one_of(st.none(), st.booleans(), st.integers(-3, 70), st.floats(allow_nan=True),
                 st.sampled_from(["h100", "l4", "mixtral-8x7b", "qlora", "fp8", "full", "",
                                  "eager", "all-linear", "q_proj", "bogus"]),
                 st.lists(st.sampled_from(["q_proj", "mlp", "nope"]), max_size=2),
                 st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))


@settings(max_examples=250, deadline=None)
@given(st.dictionaries(st.sampled_from(PATHS), JUNK, max_size=4))
def test_corrupted_scenarios_give_an_input_error_or_a_sane_report(changes):
    raw = apply_overrides(VALID, {k: v for k, v in changes.items() if v is not None})
    try:
        report = memory_for_scenario(parse_spec(raw, MemoryScenario, "fuzz.yaml"))
    except InputError as exc:
        assert str(exc).strip() and "\n" not in str(exc)
        return
    values = [report.weights_bytes, report.gradients_bytes, report.optimizer_bytes,
              report.activations_bytes, report.overhead_bytes, report.total_bytes]
    assert all(math.isfinite(v) and v >= 0 for v in values)


def test_suggested_fixes_fit_and_come_cheapest_first():
    report = training_memory("llama-3.1-70b", "h100", ParallelPlan(tp=8, dp=4, zero=1),
                             MemoryOptions(seq_len=8192))
    assert not report.fits
    fixes = suggest_fixes(report)
    assert fixes and all(fixed.fits for _, fixed in fixes)
    totals = [fixed.total_bytes for _, fixed in fixes]
    assert totals == sorted(totals)


def test_a_fix_keeps_tensor_parallelism_inside_the_nvlink_domain():
    """TP=8 on 8-GPU H100 nodes was offered '--tp 16 --dp 1', whose per-layer collectives
    cross the NICs; on GB200 NVL72 (72 GPUs on NVLink) the same fix stays on NVLink."""
    plan = ParallelPlan(tp=8, dp=2)
    options = MemoryOptions(seq_len=8192)
    h100 = training_memory("llama-3.1-70b", "h100", plan, options)
    assert not h100.fits
    assert not any("--tp 16" in change for change, _ in suggest_fixes(h100, changes=2))
    wider = training_memory("llama-3.1-70b", "h100", ParallelPlan(tp=16, dp=1), options)
    assert wider.total_bytes < h100.total_bytes  # it would save memory: left out on purpose
    gb200 = training_memory("llama-3.1-70b", "gb200", plan, options)
    assert any("--tp 16" in change for change, _ in suggest_fixes(gb200, changes=2))


def test_a_zero_stage_beyond_the_next_is_offered_when_only_it_fits():
    # ZeRO-1 and -2 leave 8B's 15 GiB of bf16 weights whole on a 40 GB A100: only ZeRO-3 fits
    report = training_memory("llama-3.1-8b", "a100-sxm4-40gb", ParallelPlan(dp=8),
                             MemoryOptions(seq_len=4096))
    fixes = dict(suggest_fixes(report))
    assert "--zero 3" in fixes and fixes["--zero 3"].fits
    for stage in (1, 2):
        assert not training_memory("llama-3.1-8b", "a100-sxm4-40gb",
                                   ParallelPlan(dp=8, zero=stage),
                                   MemoryOptions(seq_len=4096)).fits
    # where ZeRO-1 fits, it is the one offered, not the heavier stages too
    report = training_memory("llama-3.1-8b", "h100", ParallelPlan(dp=8),
                             MemoryOptions(seq_len=4096))
    zero = [label for label, _ in suggest_fixes(report) if label.startswith("--zero")]
    assert zero == ["--zero 1"]


def test_an_optimizer_with_smaller_states_is_offered_when_it_fits():
    """8B on one H100: 8-bit Adam keeps the fp32 master copy (6 bytes a parameter) and
    does not fit alone; pure bf16 Adam (4 bytes) does. The fixes offered only 8-bit Adam
    and said no single change fits."""
    from infraplan.training.fit_check import fit_check, scenario_from_flags

    flags = {"model": "llama-3.1-8b", "gpu": "h100", "zero": 1}  # `infraplan memory`'s
    check = fit_check(scenario_from_flags(flags))
    assert not check.report.fits and check.changes_per_fix == 1
    fixes = dict(check.fixes)
    assert list(fixes) == ["--optimizer adamw-bf16"] and fixes["--optimizer adamw-bf16"].fits
    eight_bit = fit_check(scenario_from_flags({**flags, "optimizer": "adamw-8bit"}))
    assert not eight_bit.report.fits
    assert check.report.total_bytes > eight_bit.report.total_bytes \
        > fixes["--optimizer adamw-bf16"].total_bytes
    assert [label for label, _ in eight_bit.fixes] == ["--recompute full",
                                                       "--optimizer adamw-bf16"]


def test_when_no_single_change_fits_pairs_are_offered(capsys):
    from infraplan.cli import main
    from infraplan.training.fit_check import fit_check, scenario_from_flags

    # 128k tokens over CP 8 at ZeRO-0: recompute alone leaves 120 GiB of states, ZeRO-1
    # alone 72 GiB of activations; together they fit
    flags = {"model": "llama-3.1-8b", "gpu": "h100", "num_gpus": 8, "cp": 8,
             "seq_len": 131072}
    check = fit_check(scenario_from_flags(flags))
    assert not check.report.fits and check.changes_per_fix == 2
    assert [label for label, _ in check.fixes] == ["--recompute full --zero 1",
                                                   "--recompute full --optimizer adamw-bf16"]
    assert all(fixed.fits for _, fixed in check.fixes)
    assert not suggest_fixes(check.report)
    argv = ["memory", "--model", "llama-3.1-8b", "--gpu", "h100", "--num-gpus", "8",
            "--cp", "8", "--seq-len", "131072"]
    assert main(argv) == 1  # does not fit
    out = capsys.readouterr().out
    assert "No single change fits; pairs of changes that do:\n  --recompute full --zero 1 " \
        in out
    assert main([*argv, "--recompute", "full", "--zero", "1"]) == 0
    assert "FITS" in capsys.readouterr().out
    # and when no pair is enough either, it says so
    assert main(["memory", "--model", "llama-3.1-70b", "--gpu", "h100", "--num-gpus", "4",
                 "--tp", "4"]) == 1
    assert "No single change or pair of changes makes this plan fit." in \
        capsys.readouterr().out


def test_min_gpus_is_the_sharded_model_states_over_usable_memory():
    report = training_memory("llama-3.1-70b", "h100", ParallelPlan(tp=8),
                             MemoryOptions(seq_len=8192))
    usable = report.capacity_bytes - 0.75 * 2**30 - 0.5 * 2**30
    assert min_gpus_for_states(report) == math.ceil(report.params_total * 16 / usable) == 14


@pytest.mark.parametrize("argv, hint", [
    (["simulate", "train", "examples/serve-llama8b-chat.yaml"], "plan serve / simulate serve"),
    (["plan", "train", "examples/serve-llama8b-chat.yaml"], "plan serve / simulate serve"),
    (["memory", "examples/serve-llama8b-chat.yaml"], "plan serve / simulate serve"),
    (["plan", "serve", "examples/train-llama-3.1-70b.yaml"], "plan train / simulate train"),
    (["simulate", "serve", "examples/memory-llama-3.1-8b-qlora.yaml"], "memory"),
])
def test_a_scenario_given_to_the_wrong_command_says_which_one(capsys, argv, hint):
    from infraplan.cli import main

    root = Path(__file__).resolve().parents[2]
    argv = [str(root / a) if a.endswith(".yaml") else a for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert hint in err and err.count("\n") == 1


EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.yaml"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
@pytest.mark.parametrize("mode", ["python", "json"])
def test_a_scenario_written_back_by_model_dump_reads_the_same(path, mode):
    """Every field at its default, and every kind-specific field of the kinds not chosen,
    must not be refused on the way back (checks ask spec_checks.given, not whether a key
    is present), and nothing may change: not even which spot pricing rule applies."""
    import yaml

    from infraplan.serving.scenario import ServeScenario
    from infraplan.workloads import TrainScenario

    raw = yaml.safe_load(path.read_text())
    kind = ServeScenario if "traffic" in raw else \
        TrainScenario if "gpus" in raw["hardware"] else MemoryScenario
    scenario = parse_spec(raw, kind, path.name)
    dumped = scenario.model_dump(mode=mode)
    assert parse_spec(dumped, kind, path.name) == scenario
    assert kind.model_validate(dumped).model_dump(mode=mode) == dumped


def test_examples_cover_every_scenario_kind():
    assert {"traffic" in p.read_text() for p in EXAMPLES} == {True, False}
    assert any("spot" in p.read_text() for p in EXAMPLES)
