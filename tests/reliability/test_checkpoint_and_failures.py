"""Failure rates from the Llama 3 run, checkpoint sizes and times, Young/Daly intervals."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infraplan.catalog import load_catalog
from infraplan.errors import InputError
from infraplan.models import load_model, param_counts
from infraplan.reliability.checkpoint import (
    checkpoint_bytes,
    daly_interval_s,
    plan_checkpoints,
    transfer_time_s,
    waste_fraction,
    young_interval_s,
)
from infraplan.reliability.failures import from_run, llama3_failure_model

HOUR = 3600.0


def test_llama3_rate_and_job_mtbf():
    model = llama3_failure_model()
    assert model.rate_per_gpu_s * HOUR == pytest.approx(419 / (54 * 24 * 16384))
    # the run itself: one unexpected interruption every 3.09 hours
    assert model.job_mtbf_s(16384) / HOUR == pytest.approx(54 * 24 / 419)
    # rate grows with the job: 1,024 GPUs are interrupted 16x less often
    assert model.job_mtbf_s(1024) == pytest.approx(16 * model.job_mtbf_s(16384))
    assert model.expected_interruptions(16384, 54 * 24 * HOUR) == pytest.approx(419)
    assert "419" in model.derivation


def test_checkpoint_bytes_follow_the_zero_accounting():
    n = param_counts(load_model("llama-3.1-70b")).total
    assert checkpoint_bytes(n) == pytest.approx(14 * n)  # 2 (bf16) + 12 (Adam, fp32 master)
    assert checkpoint_bytes(n, optimizer_name="adamw-bf16") == pytest.approx(6 * n)


def test_transfer_time_takes_the_slower_limit():
    catalog = load_catalog()
    # a tier whose total scales with its nodes (S3 was one, until its per-prefix request
    # rate capped it: test_catalog.test_s3_writes_a_checkpoint_no_faster_than_...)
    scaling = next(t for t in catalog.storage if t.write_bytes_per_s_aggregate is None)
    size = 1e12
    one, four = transfer_time_s(size, scaling, 1), transfer_time_s(size, scaling, 4)
    assert one == pytest.approx(scaling.latency_s + size / scaling.write_bytes_per_s_per_node)
    assert four == pytest.approx(scaling.latency_s
                                 + size / (4 * scaling.write_bytes_per_s_per_node))
    capped = next(t for t in catalog.storage if t.write_bytes_per_s_aggregate is not None)
    many = transfer_time_s(size, capped, 10_000)
    assert many == pytest.approx(capped.latency_s + size / capped.write_bytes_per_s_aggregate)


@settings(max_examples=200, deadline=None)
@given(c=st.floats(1, 3600), m=st.floats(3600, 30 * 24 * 3600))
def test_young_interval_minimises_the_first_order_waste(c, m):
    tau = young_interval_s(c, m)
    grid = tau * np.linspace(0.5, 1.5, 2001)
    waste = [waste_fraction(t, c, m) for t in grid]
    assert grid[int(np.argmin(waste))] == pytest.approx(tau, rel=1e-3)
    # Daly's refinement agrees when C << M and never exceeds M
    daly = daly_interval_s(c, m)
    assert daly <= m
    if c / m < 1e-3:
        assert daly == pytest.approx(tau, rel=0.03)


def test_daly_regimes():
    assert daly_interval_s(10, 1e6) == pytest.approx(math.sqrt(2 * 10 * 1e6), rel=0.01)
    assert daly_interval_s(300, 100) == 100  # checkpoints longer than 2 M: every M
    with pytest.raises(InputError):
        young_interval_s(0, 100)
    with pytest.raises(InputError):
        from_run(10, 0, 8, name="x")


def test_plan_for_a_large_job_is_async_cheap_and_blocking_costly():
    model = llama3_failure_model()
    n = param_counts(load_model("llama-3.1-405b")).total
    tier = load_catalog().storage.get("s3-standard")
    mtbf = model.job_mtbf_s(16384)
    async_plan = plan_checkpoints(n, tier, nodes=2048, num_gpus=16384, mtbf_s=mtbf)
    sync_plan = plan_checkpoints(n, tier, nodes=2048, num_gpus=16384, mtbf_s=mtbf,
                                 asynchronous=False)
    assert async_plan.size_bytes == pytest.approx(14 * n)
    assert async_plan.blocking_s < sync_plan.blocking_s == sync_plan.write_s
    assert 0 < async_plan.waste_fraction < sync_plan.waste_fraction < 1
    assert async_plan.interval_s >= async_plan.write_s


def test_daly_is_reported_apart_from_the_upload_it_is_raised_to():
    """405B on 16,384 H100s to FSx for Lustre: Daly's interval for the 0.0139 s blocking
    copy and the job's 11,135 s MTBF is 17.6 s, but the 5.68 TB upload takes 56.8 s. The
    plan checkpoints every 56.8 s; that figure was reported as Daly's."""
    n = param_counts(load_model("llama-3.1-405b")).total
    tier = load_catalog().storage.get("fsx-lustre-p2-1000")
    mtbf = llama3_failure_model().job_mtbf_s(16384)
    plan = plan_checkpoints(n, tier, nodes=2048, num_gpus=16384, mtbf_s=mtbf)
    assert mtbf == pytest.approx(11135, abs=1)
    assert plan.blocking_s == pytest.approx(0.0139, abs=1e-4)
    assert plan.write_s == pytest.approx(56.8, abs=0.05)
    assert plan.daly_interval_s == pytest.approx(daly_interval_s(plan.blocking_s, mtbf))
    assert plan.daly_interval_s == pytest.approx(17.6, abs=0.05)
    assert plan.interval_s == plan.write_s and plan.raised_to_write
    read_s = transfer_time_s(plan.size_bytes, tier, 2048, write=False)
    assert plan.waste_fraction == pytest.approx(waste_fraction(  # at the interval used
        plan.write_s, plan.blocking_s, mtbf, read_s))
    small = plan_checkpoints(2e9, tier, nodes=8, num_gpus=64, mtbf_s=mtbf * 256)
    assert small.interval_s == small.daly_interval_s and not small.raised_to_write
