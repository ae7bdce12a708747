"""plan serve read the deployment: block and ignored it without a word (audit s61): every
example carries both blocks, so a user's kv_dtype: fp8 or max_num_seqs seemed planned."""

from __future__ import annotations

import json

import yaml

from infraplan.cli import main
from infraplan.models import load_model
from infraplan.serving.scenario import ServeScenario
from infraplan.serving.search_space import ignored_deployment_note

RAW = dict(model="llama-3.1-8b", slo={"ttft_p99_s": 1.0, "tpot_p99_s": 0.05},
           traffic=dict(arrival={"kind": "poisson", "rate_per_s": 5}, num_requests=300,
                        input={"kind": "lognormal", "mean": 1000, "sigma": 0.8, "max": 16000},
                        output={"kind": "lognormal", "mean": 250, "sigma": 0.8, "max": 4000}),
           search=dict(gpus=["h100"], tp=[1], weight_dtypes=["fp8"], max_replicas=4))
NOTE = ("deployment: is what simulate serve runs; plan serve searches search: (gpus, tp, "
        "weight_dtypes, kv_dtypes, engine, max_num_seqs, max_replicas) with the engine's "
        "defaults for the rest, and ignores deployment's ")


def _note(deployment: dict) -> list[str]:
    scenario = ServeScenario.model_validate(dict(RAW, deployment=deployment))
    return ignored_deployment_note(scenario, load_model("llama-3.1-8b"))


def test_the_keys_plan_serve_ignores_are_named_and_only_those():
    assert _note({"gpu": "H100-SXM", "tp": 1, "replicas": 2, "weight_dtype": "fp8",
                  "engine": "vllm"}) == []  # all within the search (an alias of h100 too)
    assert _note({"gpu": "a100-sxm4-80gb", "tp": 2, "replicas": 2, "kv_dtype": "fp8",
                  "max_num_seqs": 64, "router": "round_robin", "chunked_prefill": False,
                  "speculative": {"method": "ngram", "acceptance_rate": 0.5}}) == [
        NOTE + "gpu: a100-sxm4-80gb, tp: 2, kv_dtype: fp8, max_num_seqs: 64, router: "
               "round_robin, chunked_prefill: false, speculative"]


def test_plan_serve_prints_the_note_in_text_and_json(tmp_path, capsys):
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(dict(RAW, deployment={"gpu": "h100", "kv_dtype": "fp8",
                                                         "max_num_seqs": 64})))
    assert main(["plan", "serve", str(path)]) == 0
    assert f"note: {NOTE}kv_dtype: fp8, max_num_seqs: 64\n" in capsys.readouterr().out
    assert main(["plan", "serve", str(path), "--json"]) == 0
    assert NOTE + "kv_dtype: fp8, max_num_seqs: 64" in json.loads(
        capsys.readouterr().out)["notes"]
