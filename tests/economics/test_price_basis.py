"""The compute line's basis says what a price commits to and how sure it is: a reserved
price bills its whole term, a scenario's own price is billed per GPU used, and a catalog
offer's date and estimate flag are shown (finance audit, 2026-11)."""

from __future__ import annotations

import datetime as dt

import pytest

from infraplan.economics.cost import CostInputs
from infraplan.economics.instances import Footprint, rent
from infraplan.economics.offers import Offer
from infraplan.economics.spec import EnergySpec, plan_economics, training_footprint_for


def _compute(gpu, n, gpu_hours, *, prices, pricing, footprint=None):
    econ = plan_economics(gpu, n, gpu_hours, gpu_hours / n * 3600.0, prices=prices,
                          pricing=pricing, costs=CostInputs(), energy=EnergySpec(),
                          footprint=footprint)
    return econ.cost.items[0]


def test_a_reserved_line_states_the_whole_term_it_commits_to():
    """16 TPU v5e chips reserved for a year at $0.84 billed $2,768.52 (the 3,296 chip-hours
    of an 8.6-day job) and never said the year costs 16 x $0.84 x 8,766.72 h = $117,825."""
    item = _compute("tpu-v5e", 16, 3295.86, prices={}, pricing="reserved-1y",
                    footprint=training_footprint_for("tpu-v5e", 16))
    assert item.usd == pytest.approx(2768.52, abs=0.01)
    assert item.formula.endswith(
        "; reserved-1y bills a 1-year term: 16 GPUs x $0.84 x 8,766.72 h = $117,825 "
        "committed; this line counts the 3,296 GPU-h the job uses (2.3 % of the term))")


def test_a_scenarios_own_reserved_price_commits_the_gpus_used_for_three_years():
    item = _compute("h100", 12, 599.263, prices={"h100": 2.0}, pricing="reserved-3y",
                    footprint=training_footprint_for("h100", 12))
    assert item.usd == pytest.approx(1198.526)
    # 12 x $2 x 3 x 8,766.72 h = $631,203.84; 599.263 / (12 x 26,300.16) = 0.19 %
    assert item.formula == (
        "599.263 GPU-h x $2.00/GPU-h (the scenario's price, per GPU used: whole instances are "
        "billed only for catalog offers; reserved-3y bills a 3-year term: 12 GPUs x $2.00 x "
        "26,300.16 h = $631,204 committed; this line counts the 599 GPU-h the job uses "
        "(0.2 % of the term))")


def test_whole_instances_commit_the_gpus_billed_not_the_gpus_used():
    """12 GPUs on 8-GPU instances: the term holds 16."""
    from infraplan.economics.spec import commitment_note

    note = commitment_note("reserved-1y", 16, 1.80, 730.56 * 12, what="a month uses")
    assert note == ("reserved-1y bills a 1-year term: 16 GPUs x $1.80 x 8,766.72 h = "
                    "$252,482 committed; this line counts the 8,767 GPU-h a month uses "
                    "(6.2 % of the term)")
    assert commitment_note("on_demand", 16, 1.80, 100.0) == ""
    assert commitment_note("spot", 16, 1.80, 100.0) == ""


def test_on_demand_and_spot_lines_state_no_term():
    item = _compute("h100", 12, 599.263, prices={"h100": 2.95}, pricing="on_demand")
    assert "term" not in item.formula and item.usd == pytest.approx(1767.83, abs=0.01)


def _offer(estimate: bool, region: str) -> Offer:
    return Offer(provider="example", instance_type="8x", accelerator="h100", count=8,
                 region=region, on_demand_usd_per_hour=8 * 2.95, observed="2026-11-09",
                 estimate=estimate, source="a test", retrieved=dt.date.today())


def test_an_offers_basis_gives_its_date_and_whether_it_is_an_estimate():
    """'$0.79/GPU-h (cheapest on-demand offer: runpod 1x_L40S_COMMUNITY)' hid that the row
    is an estimate and when it was seen."""
    listed = rent("h100", "on_demand", Footprint(8, 1, 8), offers=[_offer(False, "us-east-1")])
    assert listed.basis() == ("cheapest on-demand offer of 8+ GPUs an instance: example 8x "
                              "(us-east-1, 2026-11-09)")
    guessed = rent("h100", "on_demand", Footprint(8, 1, 8), offers=[_offer(True, "")])
    assert guessed.basis() == ("cheapest on-demand offer of 8+ GPUs an instance: example 8x "
                               "(2026-11-09, an estimate)")


def test_a_serving_months_reserved_line_states_the_term():
    """plan serve's month of 2 H100s reserved for a year: $3,068.35 of a $36,820 term."""
    from infraplan.serving.scenario import ServeScenario

    scenario = ServeScenario.model_validate({
        "model": "llama-3.1-8b", "pricing": "reserved-1y", "prices": {"h100": 2.1},
        "traffic": {"arrival": {"kind": "poisson", "rate_per_s": 1}, "num_requests": 10,
                    "input": {"kind": "fixed", "value": 100},
                    "output": {"kind": "fixed", "value": 10}},
        "deployment": {"gpu": "h100", "tp": 2, "replicas": 1}})
    item = scenario.monthly_economics(scenario.deployment_spec())["cost"]["items"][0]
    assert item["usd"] == pytest.approx(2 * 730.56 * 2.1)
    assert item["formula"].endswith(
        "; reserved-1y bills a 1-year term: 2 GPUs x $2.10 x 8,766.72 h = $36,820 committed; "
        "this line counts the 1,461 GPU-h a month of the deployment uses (8.3 % of the term))")
