"""plan serve's $/M output tokens for diurnal traffic is the month's bill over the month's
tokens: priced at the peak's output rate it was half of it ($1.842 against $3.70 for
serve-llama70b-diurnal.yaml); a constant rate keeps $/h over the tokens of an hour."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from infraplan.report.serving import plan_report
from infraplan.serving.planner import plan_serving
from infraplan.serving.scenario import ServeScenario
from infraplan.serving.lengths import expected_length
from infraplan.serving.traffic import mean_rate_per_s

EXAMPLE = Path(__file__).parents[2] / "examples" / "serve-llama70b-diurnal.yaml"
SECONDS_PER_MONTH = 30.44 * 86400  # economics/cost.py's month: 2,630,016 s


def _diurnal(**search) -> ServeScenario:
    raw = yaml.safe_load(EXAMPLE.read_text())
    raw["search"] = {"gpus": ["h100"], "tp": [2], "weight_dtypes": ["fp8"],
                     "max_replicas": 16, **search}
    return ServeScenario.model_validate(raw)


def test_a_diurnal_plans_price_per_token_is_the_months():
    scenario = _diurnal()
    plan = plan_serving(scenario)
    best = plan.best
    assert plan.rate_per_s == 12 and best.deployment.replicas == 4  # sized for the peak
    mean = mean_rate_per_s(scenario.traffic)
    assert f"{mean:.3g}" == "5.92"
    month_usd = best.economics["cost"]["total_usd"]
    assert month_usd == pytest.approx(8 * 2.95 * SECONDS_PER_MONTH / 3600)  # $17,241
    per_request = expected_length(scenario.traffic.output)
    assert 299 < per_request < 300  # lognormal, mean 300, cut at 4,000
    month_tokens = mean * per_request * SECONDS_PER_MONTH  # 4.67 billion
    expected = month_usd / month_tokens * 1e6
    assert expected == pytest.approx(3.695, abs=0.002)
    data = best.to_json(plan.rate_per_s)
    assert data["usd_per_million_output_tokens"] == pytest.approx(expected)
    assert data["usd_per_million_output_tokens_basis"] == "over the day's curve"
    # the figure at the peak's output rate, which was shown, is half of it
    assert best.summary["cost"]["usd_per_million_output_tokens"] < 0.6 * expected
    text = plan_report("diurnal", plan, 0)
    assert "$/M out tok over the day's curve" in text
    assert f"${expected:,.3f}" in text


def test_a_constant_rate_keeps_dollars_an_hour_over_tokens_an_hour():
    raw = yaml.safe_load(EXAMPLE.read_text())
    raw["traffic"]["arrival"] = {"kind": "poisson", "rate_per_s": 6}
    raw["search"] = {"gpus": ["h100"], "tp": [2], "weight_dtypes": ["fp8"], "max_replicas": 8}
    plan = plan_serving(ServeScenario.model_validate(raw))
    best = plan.best
    data = best.to_json(plan.rate_per_s)
    tokens_per_s = data["steady_output_tokens_per_s"] or data["output_tokens_per_s"]
    assert data["usd_per_million_output_tokens"] == pytest.approx(
        best.usd_per_hour / (tokens_per_s * 3600) * 1e6)
    assert data["usd_per_million_output_tokens"] == \
        best.summary["cost"]["usd_per_million_output_tokens"]
    assert data["usd_per_million_output_tokens_basis"] == "at the simulated rate"
    assert "$/M out tok over" not in plan_report("constant", plan, 0)


def test_deployments_billed_the_same_get_the_same_price_per_token():
    """The month's tokens are the workload's, not each simulation's sample of it: at the
    same $/h two deployments priced $7.404 and $7.454 (session 61's audit)."""
    plan = plan_serving(_diurnal(gpus=["h100", "h200"], tp=[2, 4, 8],
                                 weight_dtypes=["fp8", "bf16"]))
    by_hour: dict[float, set[float]] = {}
    for cand in plan.ranked:
        by_hour.setdefault(round(cand.usd_per_hour, 6), set()).add(
            cand.curve_usd_per_million_output)
    assert any(len(c) > 1 for c in [[c for c in plan.ranked if round(c.usd_per_hour, 6) == h]
                                    for h in by_hour])  # some $/h is shared
    assert all(len(prices) == 1 for prices in by_hour.values()), by_hour


def test_simulate_serve_prices_the_day_not_the_simulated_hours(capsys):
    """simulate serve on a diurnal file simulates the first hours of the day (0-0.27 h,
    about 2 requests/s): priced at their output rate a million tokens cost $10.76, three
    times the month's bill over the month's tokens, which plan serve and the report show."""
    from infraplan.cli import main
    from infraplan.serving.run import simulate_scenario

    raw = yaml.safe_load(EXAMPLE.read_text())
    scenario = ServeScenario.model_validate(raw)
    sim = simulate_scenario(scenario)
    cost = sim["summary"]["cost"]
    month_usd = scenario.monthly_economics(sim["deployment"])["cost"]["total_usd"]
    tokens = (mean_rate_per_s(scenario.traffic) * expected_length(scenario.traffic.output)
              * SECONDS_PER_MONTH)
    assert cost["curve"]["usd_per_million_output_tokens"] == pytest.approx(
        month_usd / tokens * 1e6)
    assert cost["usd_per_million_output_tokens"] > 2.5 * cost["curve"][
        "usd_per_million_output_tokens"]
    assert main(["simulate", "serve", str(EXAMPLE)]) == 0
    out = capsys.readouterr().out
    curve = cost["curve"]["usd_per_million_output_tokens"]
    assert (f"cost: ${curve:,.3f} per million output tokens over the day's curve: the month's "
            f"${month_usd:,.0f} over {tokens / 1e6:,.0f} million output tokens") in out
    assert (f"(the simulated hours alone: ${cost['usd_per_million_output_tokens']:,.3f} per "
            "million output tokens") in out
