"""plan serve's tables show the GPUs billed on whole instances beside those used."""

from __future__ import annotations

from pathlib import Path

import yaml

from infraplan.serving.deployment import Deployment
from infraplan.serving.planner import Candidate
from infraplan.serving.scenario import ServeScenario

EXAMPLE = Path(__file__).parents[2] / "examples" / "serve-llama70b-diurnal.yaml"


def test_the_plans_table_names_gpus_billed_beyond_those_used():
    """3 replicas of 2 H200s on the catalog's 8-GPU instances cost what 8 GPUs do: the
    table showed '6' at the price of the 8-GPU row above it, the reason only in --json."""
    scenario = ServeScenario.model_validate(yaml.safe_load(EXAMPLE.read_text()))
    three = Deployment(model="llama-3.1-70b", gpu="h200", tp=2, replicas=3,
                       weight_dtype="fp8")
    two = three.model_copy(update={"tp": 4, "replicas": 2})
    month_3, month_2 = (scenario.monthly_economics(d) for d in (three, two))
    assert (month_3["billed_gpus"], month_2["billed_gpus"]) == (8, 8)
    assert month_3["cost"]["total_usd"] == month_2["cost"]["total_usd"]
    texts = [Candidate(deployment=d, economics=m).gpus_text()
             for d, m in ((three, month_3), (two, month_2))]
    assert texts == ["6 (8 billed)", "8"]


def test_a_billed_count_keeps_the_gpus_column_numeric():
    from infraplan.report.html import _table

    html = _table({"title": "plans", "columns": ["configuration", "GPUs"],
                   "rows": [["2 x 4 x h200", "8"], ["3 x 2 x h200", "6 (8 billed)"]]})
    assert '<td class="num">6 (8 billed)</td>' in html
