"""The cost of a plan as line items: numbers by hand, units, pro-rating, bad input."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infraplan.catalog import load_catalog
from infraplan.economics.cost import (
    SECONDS_PER_MONTH,
    CostInputs,
    plan_cost,
    storage_usd_per_gb_month,
)
from infraplan.errors import InputError

DAY_S = 86_400.0


def test_line_items_by_hand():
    # 10-day run; storage kept 20 more days; S3 Standard at $0.023/GB-month (storage.yaml)
    inputs = CostInputs.from_dict({
        "dataset_gb": 100, "checkpoint_gb": 50, "checkpoints_kept": 3, "retention_days": 20,
        "egress_gb": 200, "networking_usd_per_month": 100, "networking_usd_per_hour": 0.5,
    })
    cost = plan_cost(gpu_hours=1000, usd_per_gpu_hour=2.5, duration_s=10 * DAY_S, inputs=inputs)
    assert cost.item("compute").usd == pytest.approx(2500.0)
    # 100 GB x $0.023 x (10 + 20) / 30.44 months
    assert cost.item("storage: dataset").usd == pytest.approx(100 * 0.023 * 30 / 30.44)
    assert cost.item("storage: dataset").usd == pytest.approx(2.266754271)
    # 3 x 50 GB x $0.023 x 30 / 30.44
    assert cost.item("storage: checkpoints").usd == pytest.approx(3.400131406)
    assert cost.item("egress").usd == pytest.approx(18.0)  # 200 GB x $0.09 (AWS first 10 TB)
    # $100/month x 10/30.44 months + $0.5/h x 240 h
    assert cost.item("networking").usd == pytest.approx(32.85151117 + 120.0)
    assert cost.total_usd == pytest.approx(2500 + 2.266754271 + 3.400131406 + 18 + 152.85151117)
    assert [i.name for i in cost.items] == ["compute", "storage: dataset",
                                            "storage: checkpoints", "egress", "networking"]
    assert "GPU-h" in cost.item("compute").formula
    assert "30.44-day" in cost.item("storage: dataset").formula


def test_a_30_44_day_run_bills_exactly_one_month():
    assert SECONDS_PER_MONTH == pytest.approx(30.44 * 86_400)
    cost = plan_cost(0, 0, 30.44 * DAY_S, {"dataset_gb": 1000, "monitoring_usd_per_month": 250})
    assert cost.item("storage: dataset").usd == pytest.approx(1000 * 0.023)
    assert cost.item("monitoring").usd == pytest.approx(250.0)


def test_gb_and_gib_are_not_confused():
    tib = CostInputs.from_dict({"dataset_gb": "1 TiB"})
    tb = CostInputs.from_dict({"dataset_gb": "1 TB"})
    plain = CostInputs.from_dict({"dataset_gb": 1000})
    assert tib.dataset_gb == pytest.approx(2**40 / 1e9)  # 1,099.511627776 GB
    assert tb.dataset_gb == pytest.approx(1000.0)
    assert plain.dataset_gb == pytest.approx(1000.0)
    assert CostInputs.from_dict({"egress_gb": "500 GiB"}).egress_gb == pytest.approx(536.870912)
    month = 30.44 * DAY_S
    ratio = (plan_cost(0, 0, month, tib).item("storage: dataset").usd
             / plan_cost(0, 0, month, tb).item("storage: dataset").usd)
    assert ratio == pytest.approx(1.099511627776)


def test_only_compute_when_nothing_else_is_asked():
    cost = plan_cost(10, 3.0, 3600)
    assert [i.name for i in cost.items] == ["compute"]
    assert cost.total_usd == pytest.approx(30.0)
    assert cost.to_dict()["total_usd"] == pytest.approx(30.0)


def test_tier_prices_come_from_the_storage_catalog_and_can_be_overridden():
    gcs = load_catalog().storage.get("gcs-standard").price_usd_per_gb_month
    assert gcs == pytest.approx(0.020)
    inputs = CostInputs.from_dict({"dataset_tier": "gcs", "checkpoint_tier": "efs",
                                   "checkpoint_usd_per_gb_month": 0.5})
    assert storage_usd_per_gb_month(inputs, "dataset") == pytest.approx(0.020)
    assert storage_usd_per_gb_month(inputs, "checkpoint") == pytest.approx(0.5)
    # an unpriced tier is fine once a price is given (0: already paid for with the node)
    free = CostInputs.from_dict({"dataset_tier": "local-nvme-8x-u2", "dataset_gb": 10,
                                 "dataset_usd_per_gb_month": 0})
    assert plan_cost(1, 1, 3600, free).item("storage: dataset").usd == 0


def test_checkpoints_kept_zero_stores_nothing():
    cost = plan_cost(1, 1, DAY_S, {"checkpoint_gb": 100, "checkpoints_kept": 0})
    assert [i.name for i in cost.items] == ["compute"]


@pytest.mark.parametrize("raw, field", [
    ({"egress_usd_per_gb": -0.01}, "egress_usd_per_gb"),
    ({"dataset_usd_per_gb_month": -1}, "dataset_usd_per_gb_month"),
    ({"dataset_gb": -5}, "dataset_gb"),
    ({"retention_days": -1}, "retention_days"),
    ({"monitoring_usd_per_hour": float("nan")}, "monitoring_usd_per_hour"),
    ({"dataset_gb": "3 GW"}, "dataset_gb"),
])
def test_bad_amounts_name_the_field(raw, field):
    with pytest.raises(InputError) as info:
        CostInputs.from_dict(raw)
    assert field in str(info.value)


def test_unknown_field_gets_a_close_match():
    with pytest.raises(InputError) as info:
        CostInputs.from_dict({"egres_gb": 10})
    message = str(info.value)
    assert "egres_gb" in message and "did you mean 'egress_gb'" in message


def test_unknown_tier_gets_a_close_match():
    with pytest.raises(InputError) as info:
        CostInputs.from_dict({"dataset_tier": "s3-standrd"})
    message = str(info.value)
    assert "dataset_tier" in message and "'s3-standard'" in message


def test_tier_without_price_asks_for_one():
    with pytest.raises(InputError) as info:
        plan_cost(1, 1, 3600, {"checkpoint_tier": "ddn", "checkpoint_gb": 10})
    assert "checkpoint_usd_per_gb_month" in str(info.value)


@pytest.mark.parametrize("args, name", [
    ((-1, 2.0, 3600), "gpu_hours"),
    ((1, -2.0, 3600), "usd_per_gpu_hour"),
    ((1, 2.0, float("nan")), "duration_s"),
    ((1, 2.0, float("inf")), "duration_s"),
])
def test_bad_arguments_name_the_argument(args, name):
    with pytest.raises(InputError) as info:
        plan_cost(*args)
    assert name in str(info.value)


def test_costs_section_must_be_a_mapping():
    with pytest.raises(InputError):
        plan_cost(1, 1, 1, [1, 2])  # type: ignore[arg-type]


amounts = st.floats(min_value=0, max_value=1e6, allow_nan=False, allow_infinity=False)


@settings(max_examples=60, deadline=None)
@given(gpu_hours=amounts, price=st.floats(0, 50), days=st.floats(0, 400), dataset=amounts,
       checkpoint=amounts, kept=st.integers(0, 10), egress=amounts, net=amounts,
       mon=st.floats(0, 10))
def test_items_always_sum_to_the_total(gpu_hours, price, days, dataset, checkpoint, kept,
                                       egress, net, mon):
    cost = plan_cost(gpu_hours, price, days * DAY_S, {
        "dataset_gb": dataset, "checkpoint_gb": checkpoint, "checkpoints_kept": kept,
        "egress_gb": egress, "networking_usd_per_month": net, "monitoring_usd_per_hour": mon})
    assert cost.total_usd == pytest.approx(math.fsum(i.usd for i in cost.items))
    assert all(i.usd >= 0 for i in cost.items)
    more = plan_cost(gpu_hours, price, days * DAY_S, {
        "dataset_gb": dataset, "checkpoint_gb": checkpoint, "checkpoints_kept": kept,
        "egress_gb": egress + 1, "networking_usd_per_month": net, "monitoring_usd_per_hour": mon})
    before = {i.name: i.usd for i in cost.items}
    after = {i.name: i.usd for i in more.items}
    assert after.pop("egress") == pytest.approx(before.pop("egress", 0.0) + 0.09)
    assert after == before  # one more GB out changes the egress item and nothing else
