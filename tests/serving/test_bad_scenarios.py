"""Malformed serving scenarios: the command answers in one line with exit 2, never a
traceback, whatever the file holds."""

from __future__ import annotations

import copy
import json

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infraplan.cli import main

BASE = {
    "model": "llama-3.1-8b",
    "traffic": {"arrival": {"kind": "poisson", "rate_per_s": 5}, "num_requests": 20,
                "input": {"kind": "lognormal", "mean": 300, "sigma": 0.5},
                "output": {"kind": "fixed", "value": 20}},
    "slo": {"ttft_p99_s": 1.0, "tpot_p99_s": 0.05},
    "deployment": {"gpu": "h100", "tp": 1, "replicas": 2, "weight_dtype": "fp8",
                   "max_num_seqs": 64},
}
PATHS = [("model",), ("traffic", "arrival", "kind"), ("traffic", "arrival", "rate_per_s"),
         ("traffic", "num_requests"), ("traffic", "input", "mean"),
         ("traffic", "input", "sigma"), ("traffic", "output", "value"), ("slo", "ttft_p99_s"),
         ("deployment", "gpu"), ("deployment", "tp"), ("deployment", "replicas"),
         ("deployment", "weight_dtype"), ("deployment", "max_num_seqs"),
         ("deployment", "engine"), ("deployment", "kv_dtype"), ("deployment", "batching")]
VALUES = st.one_of(st.none(), st.integers(-5, 3), st.floats(-1, 2), st.just(float("nan")),
                   st.text(max_size=8), st.sampled_from(["h100", "int4", "static", "vllm",
                                                         "fp8", "sglang", "gamma"]),
                   st.lists(st.integers(0, 3), max_size=2))


@settings(max_examples=120, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=st.lists(st.tuples(st.sampled_from(PATHS), VALUES, st.booleans()),
                      min_size=1, max_size=3))
def test_mutated_scenarios_never_crash(tmp_path, capsys, edits):
    raw = copy.deepcopy(BASE)
    for path, value, delete in edits:
        node = raw
        for key in path[:-1]:
            node = node.setdefault(key, {}) if isinstance(node, dict) else {}
        if not isinstance(node, dict):
            continue
        if delete:
            node.pop(path[-1], None)
        else:
            node[path[-1]] = value
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump(raw))
    code = main(["simulate", "serve", str(scenario)])
    err = capsys.readouterr().err
    assert code in (0, 2)
    if code == 2:
        assert err.startswith("error: ") and err.count("\n") == 1


def _run(tmp_path, capsys, raw, command="simulate"):
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump(raw))
    code = main([command, "serve", str(scenario)])
    return code, capsys.readouterr().err


def test_a_kv_cache_format_no_engine_stores_is_refused_with_the_choices(tmp_path, capsys):
    """nf4, fp4, fp6, tf32 and fp64 are dtypes, not KV-cache formats: the cache size they
    would give is fiction."""
    for name in ("nf4", "fp4", "fp6", "tf32", "fp64"):
        raw = copy.deepcopy(BASE)
        raw["deployment"]["kv_dtype"] = name
        code, err = _run(tmp_path, capsys, raw)
        assert code == 2
        assert err.startswith("error: s.yaml: deployment.kv_dtype must be a KV-cache format")
        assert "bf16, fp16, fp32, fp8, int8 or int4" in err and f"(got {name!r})" in err
    raw = copy.deepcopy(BASE)
    raw["deployment"]["kv_dtype"] = "fp9"
    assert "did you mean 'fp8'?" in _run(tmp_path, capsys, raw)[1]
    raw["deployment"]["kv_dtype"] = "FP8"  # spellings of a real format still read
    assert _run(tmp_path, capsys, raw)[0] == 0
    raw["search"] = {"gpus": ["h100"], "tp": [1], "kv_dtypes": ["fp8", "nf4"]}
    code, err = _run(tmp_path, capsys, raw, command="plan")
    assert code == 2 and "search.kv_dtypes entry 'nf4' must be a KV-cache format" in err


def test_a_weight_format_engines_do_not_ship_is_refused_with_the_choices(tmp_path, capsys):
    """nf4 (QLoRA's training format) and fp6 are dtypes, not serving weight formats; a typo
    gets the closest format, not the closest dtype (fp9 -> fp8, not fp6)."""
    for name, hint in (("nf4", "did you mean 'fp4'?"), ("fp9", "did you mean 'fp8'?"),
                       ("fp6", "")):
        raw = copy.deepcopy(BASE)
        raw["deployment"]["weight_dtype"] = name
        code, err = _run(tmp_path, capsys, raw)
        assert code == 2
        assert err.startswith("error: s.yaml: deployment.weight_dtype is not a serving weight "
                              "format")
        assert hint in err and "use bf16, fp16, fp8, int8, int4, fp4" in err
        assert f"(got {name!r})" in err


def test_an_unknown_draft_model_names_its_field(tmp_path, capsys):
    """It printed the words of a bad top-level model: which of the two was wrong?"""
    raw = copy.deepcopy(BASE)
    raw["deployment"]["speculative"] = {"method": "draft", "acceptance_rate": 0.7,
                                        "draft_model": "llama-9b"}
    code, err = _run(tmp_path, capsys, raw)
    assert code == 2 and err.startswith(
        "error: deployment.speculative.draft_model: unknown model 'llama-9b'; did you mean")


def test_engine_version_must_be_a_release_number():
    from infraplan.errors import InputError
    from infraplan.serving.deployment import Deployment

    with pytest.raises(InputError, match=r"deployment\.engine_version .*release number"):
        Deployment.model_validate(dict(model="mistral-7b", gpu="h100", engine_version="new"))
    for version in ("0.8.0", "0.7a", "1.0rc2"):
        assert Deployment.model_validate(dict(model="mistral-7b", gpu="h100",
                                              engine_version=version)).engine_version == version
    with pytest.raises(InputError, match=r"deployment\.engine_version"):
        Deployment.model_validate(dict(model="mistral-7b", gpu="h100", engine_version="0.7x"))


@pytest.mark.parametrize("weight_dtype", ["fp8", "int8", "fp4"])
def test_a_weight_format_vllm_has_no_kernel_for_on_volta_is_refused(tmp_path, capsys,
                                                                    weight_dtype):
    """fp8 weights on a V100 ran (vLLM's FP8 needs compute capability 7.5, its Marlin and
    INT8 kernels 8.0 / 7.5): the fix names what runs there (fp16, int4; Volta has no bf16)."""
    raw = copy.deepcopy(BASE)
    raw["deployment"].update(gpu="v100", weight_dtype=weight_dtype)
    code, err = _run(tmp_path, capsys, raw)
    assert code == 2 and err == (
        f"error: vllm has no {weight_dtype} weight kernel for v100-sxm2-32gb (volta). To fix: "
        f"use weight_dtype fp16 or int4 there, or a newer accelerator for {weight_dtype}\n")
    if weight_dtype == "fp8":
        raw["deployment"]["gpu"] = "t4"  # Turing: FP8 Marlin, weight-only
        assert _run(tmp_path, capsys, raw)[0] == 0


@pytest.mark.parametrize("gpu", ["tpu-v5e", "tpu-v6e"])
def test_vllm_on_a_tpu_serves_16_bit_and_int8_weights_only(tmp_path, capsys, gpu):
    """plan serve recommended fp8 weights on TPU v5e; vLLM's TPU backend has INT8 (W8A8)
    kernels and none for FP8, AWQ, GPTQ or Marlin."""
    raw = copy.deepcopy(BASE)
    for weight_dtype in ("fp8", "int4", "fp4"):
        raw["deployment"].update(gpu=gpu, weight_dtype=weight_dtype)
        code, err = _run(tmp_path, capsys, raw)
        assert code == 2 and err.startswith(
            f"error: vllm has no {weight_dtype} weight kernel for {gpu} ({gpu}). To fix: use "
            "weight_dtype bf16 or fp16 or int8 there"), err
    raw["deployment"].update(gpu=gpu, weight_dtype="int8")
    assert _run(tmp_path, capsys, raw)[0] == 0
    # 8B in bf16 leaves a 16 GB v5e no room for the cache: the fix names only int8
    raw["deployment"].update(gpu="tpu-v5e", weight_dtype="bf16")
    code, err = _run(tmp_path, capsys, raw)
    assert code == 2 and "quantize the weights (int8) or pick" in err, err


def test_plan_serve_rejects_what_the_engine_cannot_run_with_the_reason(tmp_path, capsys):
    raw = copy.deepcopy(BASE)
    raw["search"] = {"gpus": ["v100", "a100"], "tp": [1], "weight_dtypes": ["fp8"]}
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump(raw))
    code, out = main(["plan", "serve", str(scenario)]), capsys.readouterr().out
    assert code == 0
    assert "1 x 1 x v100-sxm2-32gb fp8/kv fp16: vllm has no fp8 weight kernel for " \
           "v100-sxm2-32gb (volta)" in out


def test_plan_serve_names_an_unpriced_accelerator_once_with_the_fix(tmp_path, capsys):
    """An accelerator without an offer was rejected at every TP and format, each line
    repeating the whole offers list, and no line said how to give it a price."""
    raw = copy.deepcopy(BASE)
    raw["search"] = {"gpus": ["mi325x", "a100"], "tp": [1, 2], "weight_dtypes": ["fp8", "bf16"]}
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump(raw))
    code, out = main(["plan", "serve", str(scenario)]), capsys.readouterr().out
    assert code == 0
    unpriced = [line for line in out.splitlines() if "no on_demand offer for mi325x" in line]
    assert len(unpriced) == 1
    assert unpriced[0].startswith("  4 configurations of mi325x (TP 1, 2; weights fp8, bf16;")
    assert unpriced[0].endswith("To fix: give a price in the scenario: prices: {mi325x: 2.50}")


@pytest.mark.parametrize("field", ["weight_dtype", "kv_dtype"])
def test_bf16_on_a_chip_without_it_is_refused_with_fp16_as_the_fix(tmp_path, capsys, field):
    """A V100 kv_dtype bf16 ran; vLLM refuses bf16 below compute capability 8.0."""
    raw = copy.deepcopy(BASE)
    raw["deployment"].update({"gpu": "v100", "weight_dtype": "fp16", field: "bf16"})
    code, err = _run(tmp_path, capsys, raw)
    assert code == 2 and err == (
        f"error: {field} bf16 does not run on v100-sxm2-32gb: volta has no bf16 arithmetic. "
        f"To fix: use {field} fp16 (the same two bytes per value)\n")


def test_a_chip_without_bf16_serves_in_fp16_by_default():
    from infraplan.serving.deployment import Deployment, resolve

    for gpu, sixteen in (("t4", "fp16"), ("v100", "fp16"), ("h100", "bf16")):
        dep = Deployment(model="llama-3.1-8b", gpu=gpu, tp=2)
        assert dep.weight_dtype == sixteen, gpu
    # a draft model's steps ran in bf16 whatever the chip: a V100 deployment with one failed
    dep = Deployment.model_validate(dict(
        model="llama-2-13b", gpu="v100", tp=4, speculative=dict(
            method="draft", draft_model="llama-2-7b", num_tokens=4, acceptance_rate=0.7)))
    assert resolve(dep).step.speculation.draft is not None


def test_plan_serve_searches_bf16_as_fp16_on_a_chip_without_it(tmp_path, capsys):
    """The default search (bf16 weights and KV) ran T4 candidates with a bf16 cache."""
    raw = copy.deepcopy(BASE)
    raw["search"] = {"gpus": ["t4", "l4"], "tp": [2], "weight_dtypes": ["bf16", "fp16"]}
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump(raw))
    assert main(["plan", "serve", str(scenario), "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    searched = sorted((c["deployment"]["gpu"], c["deployment"]["weight_dtype"],
                       c["deployment"]["kv_dtype"])
                      for c in plan["alternatives"] + plan["rejected"])
    assert searched == [("l4", "bf16", "bf16"), ("l4", "fp16", "bf16"),
                        ("t4", "fp16", "fp16")]  # t4's bf16 and fp16 are one candidate
    assert "t4 has no bf16: the searched bf16 formats run there as fp16, as an engine " \
           "serves a bf16 checkpoint on such a chip" in plan["notes"]


def test_a_tp_that_does_not_divide_the_heads_gets_the_ones_that_do(tmp_path, capsys):
    """Qwen2.5-7B has 28 heads: the fix offered 8, which does not divide them either."""
    raw = copy.deepcopy(BASE)
    raw["model"] = "qwen2.5-7b"
    raw["deployment"]["tp"] = 8
    code, err = _run(tmp_path, capsys, raw)
    assert code == 2 and err.endswith("To fix: pick a tp that divides the head count "
                                      "(1, 2, 4)\n")
