"""Energy and carbon: hand-computed kWh, grid look-ups with did-you-mean, monotonicity."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infraplan.catalog import accelerator
from infraplan.economics.energy import (
    DGX_H100_HOST_W_PER_NODE,
    carbon_kg,
    energy_kwh,
    estimate_energy,
    grid_intensity,
    grid_table,
)
from infraplan.errors import InputError, UnknownNameError

DAY_S = 86_400.0


def test_32_h100_for_a_day_by_hand():
    # 32 x 700 W = 22,400 W; x 0.9 = 20,160 W; x 24 h = 483,840 Wh; x PUE 1.2 = 580,608 Wh
    assert accelerator("h100").tdp_watts == 700
    assert energy_kwh(32, 700, 0.9, DAY_S, pue=1.2) == pytest.approx(580.608)
    est = estimate_energy("h100", 32, DAY_S, utilization=0.9, pue=1.2, g_co2e_per_kwh=400)
    assert est.energy_kwh == pytest.approx(580.608)
    assert est.carbon_kg_co2e == pytest.approx(232.2432)  # 580.608 kWh x 400 g / 1000
    assert "580.608 kWh" in est.formula


def test_carbon_from_a_region():
    row = grid_intensity("europe-west4")
    assert (row.g_co2e_per_kwh, row.year, row.estimate) == (194.35, 2025, False)
    est = estimate_energy("h100", 32, DAY_S, utilization=0.9, pue=1.2, region="europe-west4")
    assert est.carbon_kg_co2e == pytest.approx(580.608 * 194.35 / 1000)
    assert est.region == "europe-west4" and "2025" in est.intensity_note
    aws = estimate_energy("h100", 8, DAY_S, utilization=1, pue=1.1, region="aws-us-east-1")
    assert aws.region == "us-east-1" and "estimate" in aws.intensity_note
    assert estimate_energy("h100", 8, DAY_S, utilization=1, pue=1.1).carbon_kg_co2e is None


def test_host_power_share_per_node():
    # DGX H100: 10.2 kW maximum system power - 8 x 700 W = 4,600 W of host per node
    assert DGX_H100_HOST_W_PER_NODE == 4600
    # 16 GPUs on 2 nodes: (16 x 700 + 2 x 4,600) W = 20,400 W for 10 h at PUE 1 = 204 kWh
    assert energy_kwh(16, 700, 1.0, 36_000, pue=1.0, host_w_per_node=4600) == pytest.approx(204)
    # 9 GPUs need ceil(9 / 8) = 2 nodes: (6,300 + 9,200) W x 1 h = 15.5 kWh
    assert energy_kwh(9, 700, 1.0, 3600, pue=1.0, host_w_per_node=4600) == pytest.approx(15.5)
    est = estimate_energy("h100", 16, 36_000, utilization=1, pue=1,
                          host_w_per_node=DGX_H100_HOST_W_PER_NODE)
    assert est.energy_kwh == pytest.approx(204)  # gpus_per_node from the dgx-h100 system row


def test_vectorised_over_a_plan_space():
    gpus = np.array([8, 16, 32])
    util = np.array([0.5, 0.7, 0.9])
    kwh = energy_kwh(gpus, 700, util, DAY_S, pue=1.2)
    assert kwh.shape == (3,)
    for i in range(3):
        assert kwh[i] == pytest.approx(energy_kwh(int(gpus[i]), 700, float(util[i]), DAY_S,
                                                  pue=1.2))
    assert carbon_kg(kwh, 500) == pytest.approx(kwh * 0.5)


def test_unknown_region_has_a_close_match():
    with pytest.raises(UnknownNameError) as info:
        grid_intensity("us-east-l")
    assert isinstance(info.value, InputError)
    assert "'us-east-1'" in str(info.value)
    with pytest.raises(InputError) as info:
        estimate_energy("h100", 8, 3600, utilization=1, pue=1.2, region="europe-wset4")
    assert "'europe-west4'" in str(info.value)


@pytest.mark.parametrize("kwargs, name", [
    ({"utilization": 1.5}, "utilization"),
    ({"utilization": -0.1}, "utilization"),
    ({"pue": 0.9}, "pue"),
    ({"duration_s": -1}, "duration_s"),
    ({"num_gpus": -8}, "num_gpus"),
    ({"host_w_per_node": -100}, "host_w_per_node"),
    ({"num_gpus": "eight"}, "num_gpus"),
])
def test_bad_input_names_the_argument(kwargs, name):
    args = {"num_gpus": 8, "gpu_w": 700, "utilization": 0.5, "duration_s": 3600, "pue": 1.2}
    args.update(kwargs)
    pue = args.pop("pue")
    with pytest.raises(InputError) as info:
        energy_kwh(**args, pue=pue)
    assert name in str(info.value)


def test_negative_intensity_is_refused():
    with pytest.raises(InputError) as info:
        carbon_kg(10, -1)
    assert "g_co2e_per_kwh" in str(info.value)


def test_grid_rows_carry_provenance():
    rows = list(grid_table())
    assert len(rows) >= 40
    for row in rows:
        assert row.retrieved == dt.date(2026, 11, 22)
        assert len(row.source) > 20
        assert 0 <= row.g_co2e_per_kwh < 1000
        assert 2019 <= row.year <= 2026
        if row.estimate:
            assert "ESTIMATE" in row.notes
        if row.provider in ("aws", "azure"):
            assert row.estimate, row.name  # no per-region figure is published by them
    for name in ("us-east-1", "us-west-2", "europe-west4", "united-states", "world"):
        assert name in grid_table()


@settings(max_examples=80, deadline=None)
@given(kwh=st.floats(0.001, 1e7), low=st.floats(0, 900), extra=st.floats(0.001, 500))
def test_higher_intensity_more_carbon(kwh, low, extra):
    assert carbon_kg(kwh, low + extra) > carbon_kg(kwh, low)


@settings(max_examples=80, deadline=None)
@given(gpus=st.integers(1, 4096), u=st.floats(0.01, 0.99), du=st.floats(0.001, 0.01),
       hours=st.floats(0.1, 1e4), pue=st.floats(1.0, 2.0))
def test_more_utilization_more_energy(gpus, u, du, hours, pue):
    low = energy_kwh(gpus, 700, u, hours * 3600, pue=pue, host_w_per_node=4600)
    high = energy_kwh(gpus, 700, u + du, hours * 3600, pue=pue, host_w_per_node=4600)
    assert high > low
