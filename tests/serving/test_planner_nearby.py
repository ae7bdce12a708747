"""plan serve when no configuration of the search can be built: the fix names the smallest
ones just outside it that can (it used to blame the SLOs and the replica cap after 0
simulations)."""

from __future__ import annotations

import json

from infraplan.cli import main
from infraplan.errors import InputError
from infraplan.serving.deployment import Deployment, resolve
from infraplan.serving.planner import plan_serving
from infraplan.serving.scenario import ServeScenario

TRAFFIC = {"arrival": {"kind": "poisson", "rate_per_s": 2}, "num_requests": 100,
           "input": {"kind": "fixed", "value": 500}, "output": {"kind": "fixed", "value": 50}}


def _raw(model, search) -> dict:
    return {"model": model, "traffic": TRAFFIC, "slo": {"ttft_p99_s": 2.0}, "search": search}


def _builds(**kw) -> bool:
    try:
        resolve(Deployment(**kw))
    except InputError:
        return False
    return True


def test_a_70b_on_l4s_gets_the_fewest_gpus_that_hold_it():
    search = {"gpus": ["l4"], "tp": [1, 2], "weight_dtypes": ["bf16"], "max_replicas": 4}
    plan = plan_serving(ServeScenario.model_validate(_raw("llama-3.1-70b", search)))
    assert plan.none_built and plan.simulations == 0
    nearby = [(d.gpu, d.tp, d.weight_dtype) for d in plan.runnable_nearby]
    assert nearby == [("l4", 2, "int4"), ("l4", 8, "bf16")]
    for _, tp, wd in nearby:  # each builds, and no fewer GPUs in its format would
        assert _builds(model="llama-3.1-70b", gpu="l4", tp=tp, weight_dtype=wd)
        assert not _builds(model="llama-3.1-70b", gpu="l4", tp=tp // 2, weight_dtype=wd)
    assert plan.to_json()["runnable_nearby"][0]["weight_dtype"] == "int4"


def test_a_tp_that_divides_no_head_count_gets_one_that_does(tmp_path, capsys):
    search = {"gpus": ["h100"], "tp": [3], "weight_dtypes": ["bf16"], "max_replicas": 4}
    path = tmp_path / "s.yaml"
    path.write_text(json.dumps(_raw("llama-3.1-8b", search)))
    assert main(["plan", "serve", str(path)]) == 2
    err = capsys.readouterr().err
    assert ("no configuration in the search can run llama-3.1-8b: all 1 were rejected before "
            "simulation (reasons above). To fix: search what can: search.tp 1 with "
            "search.weight_dtypes bf16 on h100-sxm5-80gb (1 GPU a replica)") in err
    assert "max_replicas" not in err and "relax the SLOs" not in err


def test_a_search_that_simulated_anything_offers_none():
    raw = _raw("llama-3.1-8b", {"gpus": ["h100"], "tp": [1], "weight_dtypes": ["fp8"],
                                "max_replicas": 1})
    raw["slo"] = {"ttft_p99_s": 1e-6}  # met by nothing, but each configuration is simulated
    plan = plan_serving(ServeScenario.model_validate(raw))
    assert plan.best is None and not plan.none_built and plan.runnable_nearby == []


def test_the_report_names_the_verdict_and_what_holds_the_model():
    from infraplan.report.document_serve import serving_document

    search = {"gpus": ["l4"], "tp": [1, 2], "weight_dtypes": ["bf16"], "max_replicas": 4}
    doc = serving_document(ServeScenario.model_validate(_raw("llama-3.1-70b", search)),
                           plan=True)
    [pick] = [s for s in doc["sections"] if s["heading"] == "Pick platform"]
    assert pick["items"][0]["text"] == "no configuration in the search can run the model"
    assert ("Outside the search, these hold the model: 2 x l4 int4 (tp 2); 8 x l4 bf16 (tp 8)"
            in pick["paragraphs"])
