"""On-prem TCO and break-evens: hand-computed cost per GPU-hour, closed forms, never-crossing."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infraplan.catalog import accelerator
from infraplan.economics.tco import (
    HOURS_PER_YEAR,
    buy_vs_rent,
    electricity_price,
    facility_value,
    load_onprem,
    onprem_cost,
    self_host_vs_api,
    server,
    server_vs_api,
    tokens_text,
)
from infraplan.errors import InputError, UnknownNameError

HOURS_PER_MONTH = 30.44 * 24  # 730.56
FIXED = {"price_usd": 300_000, "amortization_years": 5, "pue": 1.25, "usd_per_kwh": 0.10,
         "colocation_usd_per_kw_month": 150, "operations_fraction_per_year": 0.04}


def test_cost_per_gpu_hour_by_hand():
    cost = onprem_cost("dgx-h100", 0.5, **FIXED)
    items = {i.name: i.usd for i in cost.items}
    assert HOURS_PER_YEAR == pytest.approx(8766.72)  # 12 x 30.44 days x 24 h
    assert items["capex"] == pytest.approx(60_000)  # $300k / 5 years
    # (8 x 700 W + 4,600 W host) = 10,200 W x 0.5 x 8,766.72 h x 1.25 = 55,887.84 kWh x $0.10
    assert items["power"] == pytest.approx(5_588.784)
    assert items["facility"] == pytest.approx(18_360)  # $150/kW-month x 10.2 kW x 12
    assert items["operations"] == pytest.approx(12_000)  # 4% of $300k
    assert cost.usd_per_year == pytest.approx(95_948.784)
    assert cost.gpu_hours_per_year == pytest.approx(35_066.88)  # 8 x 8,766.72 h x 0.5
    assert cost.usd_per_gpu_hour == pytest.approx(95_948.784 / 35_066.88)  # $2.7362
    assert cost.running_usd_per_month == pytest.approx((5_588.784 + 18_360 + 12_000) / 12)


def test_gpu_only_power_without_the_host_share():
    cost = onprem_cost("dgx-h100", 0.5, include_host=False, **FIXED)
    # 8 x 700 W x 0.5 x 8,766.72 h x 1.25 / 1000 = 30,683.52 kWh x $0.10
    assert {i.name: i.usd for i in cost.items}["power"] == pytest.approx(3_068.352)


def test_defaults_come_from_the_data_file():
    row = server("h100-8x")
    assert row.name == "dgx-h100" and row.system_power_w == 10_200
    cost = onprem_cost("dgx-h100", 1.0)
    years = facility_value("amortization-years")
    assert {i.name: i.usd for i in cost.items}["capex"] == pytest.approx(row.price_usd / years)
    assert electricity_price("tx").usd_per_kwh == pytest.approx(0.066)
    assert onprem_cost("dgx-h100", 1.0, electricity_region="california").usd_per_year > \
        onprem_cost("dgx-h100", 1.0, electricity_region="texas").usd_per_year


def test_onprem_rows_carry_provenance():
    data = load_onprem()
    for row in [*data.servers, *data.electricity, *data.facility]:
        assert row.retrieved == dt.date(2026, 11, 22) and len(row.source) > 20
    for row in data.servers:
        gpu = accelerator(row.accelerator)
        assert row.system_power_w >= row.gpus_per_server * gpu.tdp_watts
    for name in ("pue", "pue-industry-average", "colocation-usd-per-kw-month",
                 "operations-fraction-of-capex-per-year", "amortization-years"):
        assert facility_value(name) > 0
    assert {"dgx-h100", "dgx-h200", "dgx-a100-320gb"} <= set(data.servers.names())


@settings(max_examples=80, deadline=None)
@given(u=st.floats(0.01, 0.98), du=st.floats(0.001, 0.02),
       name=st.sampled_from(["dgx-h100", "dgx-h200", "dgx-a100-320gb"]))
def test_more_utilization_lowers_cost_per_gpu_hour(u, du, name):
    assert onprem_cost(name, u + du).usd_per_gpu_hour < onprem_cost(name, u).usd_per_gpu_hour


def test_buy_vs_rent_equals_the_closed_form():
    u, rent = 0.8, 2.50
    own = onprem_cost("dgx-h100", u, **FIXED)
    result = buy_vs_rent("dgx-h100", u, rent, **FIXED)
    rent_month = 8 * u * HOURS_PER_MONTH * rent  # 4,675.584 GPU-h x $2.50 = $11,688.96
    assert result.rent_usd_per_month == pytest.approx(11_688.96)
    run_month = own.running_usd_per_month
    months = 300_000 / (rent_month - run_month)  # m* = K / (G u H_m r - O(u))
    assert result.months == pytest.approx(months)
    assert result.gpu_hours == pytest.approx(months * 8 * u * HOURS_PER_MONTH)
    # the lines cross there: K + m O = m G u H_m r
    assert 300_000 + months * run_month == pytest.approx(months * rent_month)
    assert result.within_life and "pays off" in result.message


def test_buy_vs_rent_never_crosses_when_running_costs_more_than_renting():
    result = buy_vs_rent("dgx-h100", 0.1, 0.50, **FIXED)
    assert result.months is None and result.gpu_hours is None
    assert result.message.startswith("never")
    assert result.rent_usd_per_month <= result.own_usd_per_month


def test_buy_vs_rent_flags_a_crossing_after_the_useful_life():
    # rent 8 x 0.5 x 730.56 h x $2 = $5,844.48/month against ~$2,996/month running: ~105 months
    result = buy_vs_rent("dgx-h100", 0.5, 2.0, **{**FIXED, "amortization_years": 1})
    assert result.months is not None and result.months > 12
    assert not result.within_life
    assert result.message.startswith("renting is cheaper: buying would pay off after ")
    assert result.message.endswith(", beyond the assumed 1-year life")


@settings(max_examples=60, deadline=None)
@given(rent=st.floats(2.0, 10.0), extra=st.floats(0.01, 2.0))
def test_dearer_rent_breaks_even_sooner(rent, extra):
    assert buy_vs_rent("dgx-h100", 0.7, rent + extra).months < \
        buy_vs_rent("dgx-h100", 0.7, rent).months


def test_self_host_vs_api_closed_form():
    # 1,000 tokens/s, $3,000/month, API $2 per million: T* = 3,000 x 1e6 / 2 = 1.5e9 tokens
    result = self_host_vs_api(1000, 3000, 2.0)
    assert result.tokens_per_month == pytest.approx(1.5e9)
    assert result.capacity_tokens_per_month == pytest.approx(1000 * 30.44 * 86_400)
    assert 3000 / result.tokens_per_month == pytest.approx(2.0 / 1e6)  # equal cost per token
    assert result.self_host_usd_per_million_at_capacity == pytest.approx(3000 / 2630.016)
    assert "57.0%" in result.message  # 1.5e9 / 2.630016e9


@pytest.mark.parametrize("throughput, monthly, api", [(1000, 30_000, 2.0), (1000, 3000, 0.0)])
def test_self_host_never_cheaper(throughput, monthly, api):
    result = self_host_vs_api(throughput, monthly, api)
    assert result.tokens_per_month is None and result.message.startswith("never")


@pytest.mark.parametrize("call, name", [
    (lambda: onprem_cost("dgx-h100", 0), "utilization"),
    (lambda: onprem_cost("dgx-h100", 1.2), "utilization"),
    (lambda: onprem_cost("dgx-h100", 0.5, usd_per_kwh=-0.1), "usd_per_kwh"),
    (lambda: onprem_cost("dgx-h100", 0.5, price_usd=-1), "price_usd"),
    (lambda: onprem_cost("dgx-h100", 0.5, pue=0.8), "pue"),
    (lambda: onprem_cost("dgx-h100", 0.5, amortization_years=0), "amortization_years"),
    (lambda: buy_vs_rent("dgx-h100", 0.5, -2.0), "rent_usd_per_gpu_hour"),
    (lambda: self_host_vs_api(0, 100, 1), "throughput_tokens_per_s"),
    (lambda: self_host_vs_api(100, -1, 1), "monthly_cost_usd"),
    (lambda: self_host_vs_api(100, 1, -1), "api_usd_per_million_tokens"),
])
def test_bad_input_names_the_argument(call, name):
    with pytest.raises(InputError) as info:
        call()
    assert name in str(info.value)


def test_unknown_server_and_region_have_close_matches():
    with pytest.raises(UnknownNameError) as info:
        onprem_cost("dgx-h10", 0.5)
    assert "'dgx-h100'" in str(info.value)
    with pytest.raises(UnknownNameError) as info:
        onprem_cost("dgx-h100", 0.5, electricity_region="virgina")
    assert "'virginia'" in str(info.value)


def test_a_region_with_no_close_match_lists_rows_not_their_aliases():
    # 'ca' and 'california' are one row: the listing names it once, canonically
    with pytest.raises(UnknownNameError) as info:
        onprem_cost("dgx-h100", 0.5, electricity_region="mars")
    table = load_onprem().electricity
    assert info.value.listed == sorted(table.names())
    assert "valid choices: california, georgia," in str(info.value)
    assert all(f" {alias}," not in str(info.value) for alias in table.aliases())
    with pytest.raises(UnknownNameError) as info:
        onprem_cost("dgx-h10", 0.5)
    assert set(info.value.close) <= set(load_onprem().servers.names())


@pytest.mark.parametrize("call, option, bound", [
    (lambda: onprem_cost("dgx-h100", 0.7, amortization_years=1e-320),
     "amortization_years (tco --years)", "between 0.25 and 30 (got 1e-320)"),
    (lambda: onprem_cost("dgx-h100", 0.7, amortization_years=31),
     "amortization_years (tco --years)", "between 0.25 and 30 (got 31)"),
    (lambda: onprem_cost("dgx-h100", 1e-300), "utilization (tco --utilization)",
     "between 0.01 and 1 (got 1e-300)"),
    (lambda: onprem_cost("dgx-h100", 0.005), "utilization (tco --utilization)",
     "between 0.01 and 1 (got 0.005)"),
    (lambda: buy_vs_rent("dgx-h100", 0.7, 1e308), "rent_usd_per_gpu_hour (tco --rent)",
     "between 0 and 1,000 (got 1e+308)"),
])
def test_out_of_range_life_utilization_and_rent_are_refused(call, option, bound):
    """--years 1e-320 printed '$inf a year' and a payoff 'after the assumed 9.99989e-321-year
    life'; --utilization 1e-300 and --rent 1e308 printed 300-digit figures."""
    with pytest.raises(InputError) as info:
        call()
    assert str(info.value).startswith(f"{option} must be {bound}. To fix: give ")


def test_the_ends_of_the_ranges_are_accepted():
    assert onprem_cost("dgx-h100", 0.01, amortization_years=0.25).amortization_years == 0.25
    assert onprem_cost("dgx-h100", 1.0, amortization_years=30).utilization == 1.0
    assert buy_vs_rent("dgx-h100", 0.7, 1000.0).months == pytest.approx(
        270_000 / (8 * 0.7 * HOURS_PER_MONTH * 1000.0
                   - onprem_cost("dgx-h100", 0.7).running_usd_per_month))


def test_an_unknown_region_names_the_option_tco_has():
    """The hint said 'or give usd_per_kwh directly', an option `tco` does not have."""
    with pytest.raises(UnknownNameError) as info:
        onprem_cost("dgx-h100", 0.7, electricity_region="us-east-1")
    assert "with tco --region; from Python, onprem_cost(usd_per_kwh=...) sets the price " \
           "directly" in str(info.value)
    assert "or give usd_per_kwh directly" not in str(info.value)
    with pytest.raises(UnknownNameError, match="To fix: use --region"):
        electricity_price("us-east-1", fix="use --region")


def test_server_vs_api_solves_the_load_with_power_growing_with_it():
    """The break-even divided the cost at 70% utilization by full-load tokens: API $0.5 read
    '$0.6976 per million' (full load: $0.7154) and API $2 read 34.9% (33.8%)."""
    # fixed: $67,500 capex + $22,529 facility + $13,500 operations = $103,528.94/yr;
    # power at full load: 10.2 kW x 8,766.72 h x 1.3 x $0.0806 = $9,369.48/yr
    result = server_vs_api("dgx-h100", 5000, 2.0)
    assert result.fixed_usd_per_month * 12 == pytest.approx(103_528.944)
    assert result.load_usd_per_month_at_capacity * 12 == pytest.approx(9_369.4846)
    # API at full load: 5,000 x 2,630,016 s x 12 x $2 / 1e6 = $315,601.92/yr
    # x* = 103,528.944 / (315,601.92 - 9,369.4846) = 0.33807
    assert result.load_share == pytest.approx(103_528.944 / (315_601.92 - 9_369.4846))
    assert result.tokens_per_month == pytest.approx(0.338072 * 13_150_080_000, rel=1e-5)
    assert result.message == ("self-hosting is cheaper above 4.45 billion tokens/month "
                              "(33.8% of its capacity)")
    never = server_vs_api("dgx-h100", 5000, 0.5)
    assert never.self_host_usd_per_million_at_capacity == pytest.approx(
        (103_528.944 + 9_369.4846) / 12 * 1e6 / 13_150_080_000)  # $0.7154
    assert never.message == ("never: even at full load (13.2 billion tokens/month) "
                             "self-hosting costs $0.72 per million tokens, more than the API's "
                             "$0.50")


def test_tokens_in_words_never_in_exponent_form():
    assert [tokens_text(n) for n in (9_500, 4.45e8, 1.315e10, 1.234e15)] == [
        "9,500", "445 million", "13.2 billion", "1,230 trillion"]


def test_the_price_says_whether_it_is_an_estimate_and_where_it_came_from():
    own = onprem_cost("dgx-h100", 0.7)
    assert own.price.estimate and own.price.usd == 270_000
    assert own.price.source.startswith("Price: SemiAnalysis")
    assert own.price.retrieved == dt.date(2026, 11, 22) and own.given == ()
    quoted = onprem_cost("dgx-h100", 0.7, price_usd=300_000, pue=1.5)
    assert not quoted.price.estimate and quoted.price.retrieved is None
    assert quoted.given == ("price_usd", "pue") and quoted.capex_usd == 300_000
    assert not onprem_cost("dgx-a100-320gb", 0.7).price.estimate


def test_the_power_line_names_the_region():
    power = onprem_cost("dgx-h100", 0.7, electricity_region="tx").items[1].formula
    assert power.endswith("x $0.066/kWh (texas, 2023)")
    assert onprem_cost("dgx-h100", 0.7, usd_per_kwh=0.1).items[1].formula.endswith(
        "$0.10/kWh (given)")
    assert onprem_cost("dgx-h100", 0.7, usd_per_kwh=0.1).electricity_region is None
