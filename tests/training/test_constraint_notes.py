"""plan train says which constraints and objective it ranked by, and what a limit removed
(audit s17: a $97,500 budget made a 24-GPU plan 'best' without a word about the faster
40-GPU plans at $97,684)."""

from __future__ import annotations

import pytest

from infraplan.training.plan_train import plan_training
from infraplan.workloads import TrainScenario


def _gemma(**extra) -> TrainScenario:
    raw = {"model": "gemma-2-27b", "top": 3,
           "training": {"tokens": 3.0e11, "global_batch": 240, "seq_len": 8192},
           "hardware": {"gpus": ["h100"], "counts": [24, 40]}}
    raw.update(extra)
    return TrainScenario.model_validate(raw)


@pytest.fixture(scope="module")
def fastest():
    return plan_training(_gemma()).best[0]


def test_a_budget_that_removes_faster_plans_names_them(fastest):
    cost = fastest.economics["cost"]["total_usd"]
    assert fastest.plan.num_gpus == 40 and cost == pytest.approx(97_684, abs=1)
    result = plan_training(_gemma(constraints={"budget_usd": 97_500}))
    assert result.best[0].plan.num_gpus == 24
    assert result.notes[0] == "ranked by time to train (objective: time) within " \
                              "budget_usd $97,500"
    removed = result.notes[1]
    assert removed.startswith("budget_usd $97,500 removed ")
    assert removed.endswith(f"faster plans, the fastest of which (40 x h100-sxm5-80gb, "
                            f"{fastest.plan.describe()}, 34.5 days) costs $97,684")


def test_a_deadline_that_removes_cheaper_plans_names_them():
    result = plan_training(_gemma(objective="cost", constraints={"deadline_days": 40}))
    assert result.best[0].plan.num_gpus == 40
    assert result.notes[0] == "ranked by total cost (objective: cost) within deadline_days 40"
    assert result.notes[1].startswith("deadline_days 40 removed 1 cheaper plan, the cheapest "
                                      "of which (24 x h100-sxm5-80gb, TP=4 PP=1 DP=6 ")
    assert result.notes[1].endswith(", $97,378) takes 57.3 days")


def test_no_constraint_and_the_default_objective_add_no_note(fastest):
    result = plan_training(_gemma())
    assert not any(n.startswith("ranked by") or " removed " in n for n in result.notes)


def test_the_report_shows_every_constraint_and_the_objective():
    from infraplan.report.document_train import training_document

    scenario = _gemma(constraints={"budget_usd": 97_500, "deadline_days": 60})
    doc = training_document(scenario, plan_training(scenario))
    workload = next(s for s in doc["sections"] if s["heading"] == "Define workload")
    texts = {i["label"]: i["text"] for i in workload["items"]}
    assert texts["constraints"] == "deadline_days 60, budget_usd $97,500"
    assert texts["objective"] == "time to train (objective: time)"
