"""Money as a finance reader checks it (web/report audit, 2026-11-25): a unit price to the
cent ('$2.10', not '$2.1'), and a line billed on whole instances shows the GPU-hours billed
at the instance's own rate ('5,844.48 GPU-h billed x $2.95'), not the used GPU-hours at a
spread rate ('4,383.36 GPU-h x $3.93333')."""

from __future__ import annotations

import pytest

from infraplan.economics.cost import CostInputs, plan_cost
from infraplan.economics.instances import Footprint
from infraplan.economics.offers import Offer
from infraplan.economics.spec import EnergySpec, plan_economics
from infraplan.units import format_usd_rate


@pytest.mark.parametrize("usd, text", [
    (2.1, "2.10"), (2, "2.00"), (1.79, "1.79"), (8 * 2.95 / 6, "3.93333"), (0.023, "0.023"),
    (0.0004, "0.0004"), (1.234567e-5, "0.0000123457"), (12345.678, "12,345.68"),
    (0.0, "0.00")])
def test_a_unit_price_reads_to_the_cent_and_keeps_its_own_digits(usd, text):
    assert format_usd_rate(usd) == text


def test_a_whole_instance_line_shows_the_gpu_hours_billed_at_the_instances_rate():
    """3 replicas of TP 2 on one 8-GPU instance at $2.95/GPU-h for a month (730.56 h)."""
    offer = Offer(provider="example", instance_type="8x", accelerator="h100", count=8,
                  region="r", on_demand_usd_per_hour=8 * 2.95, observed="2026-11-09",
                  estimate=False, source="a test", retrieved="2026-11-25")
    used_h = 6 * 730.56
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("infraplan.economics.instances.offers_for",
                   lambda *a, **k: [offer])
        econ = plan_economics("h100", 6, used_h, 730.56 * 3600, prices={},
                              pricing="on_demand", costs=CostInputs(), energy=EnergySpec(),
                              footprint=Footprint(min_instance_gpus=2, group_gpus=2,
                                                  groups=3))
    line = econ.cost.items[0]
    assert line.usd == pytest.approx(8 * 2.95 * 730.56)
    assert line.formula.startswith(
        "5,844.48 GPU-h billed (4,383.36 GPU-h used) x $2.95/GPU-h (")


def test_a_line_without_a_fixed_part_leaves_it_out():
    """'$200/month x 1 months + $0/h x 730.56 h' read two terms where one was set."""
    month_s = 730.56 * 3600
    items = plan_cost(10.0, 2.0, month_s, CostInputs(monitoring_usd_per_month=200)).items
    assert items[1].formula == "$200.00/month x 1 month"
    hourly = plan_cost(10.0, 2.0, month_s, CostInputs(networking_usd_per_hour=0.5)).items
    assert hourly[1].formula == "$0.50/h x 730.56 h"
