"""Blackwell Ultra (HGX B300, GB300 NVL72): what its catalog rows change in a plan."""

from __future__ import annotations

import pytest

from infraplan.catalog import load_catalog
from infraplan.physics import hardware
from infraplan.serving.deployment import Deployment, resolve
from infraplan.serving.quantization import weight_format

CATALOG = load_catalog()


def _step(gpu: str, weight_dtype: str):
    return resolve(Deployment(model="llama-3.1-70b", gpu=gpu, weight_dtype=weight_dtype,
                              kv_dtype="fp8", engine="tensorrt-llm")).step


def test_int8_weights_take_the_16_bit_path_where_the_int8_tensor_path_was_cut():
    """B300's INT8 runs at 0.15 POP/s against 2.25 PFLOP/s bf16: int8 weights are
    dequantised into the bf16 GEMM (bytes of int8, math of bf16); a B200 keeps its int8
    tensor cores (4.5 POP/s)."""
    b300, b200 = CATALOG.accelerators.get("b300"), CATALOG.accelerators.get("b200")
    assert b300.peak_flops["int8"] < b300.peak_flops["bf16"] / 10
    assert weight_format("int8", b300, "bf16").gemm_dtype == "bf16"
    assert weight_format("int8", b200, "bf16").gemm_dtype == "int8"
    int8, bf16 = _step("b300", "int8"), _step("b300", "bf16")
    # prefill math at the 16-bit rate, not fifteen times slower
    assert int8.linear_s[8192] == pytest.approx(bf16.linear_s[8192], rel=0.02)
    # one sequence decoding reads half the weight bytes
    assert int8.decode_coefficients(1)[0] < 0.6 * bf16.decode_coefficients(1)[0]


def test_blackwell_ultra_runs_nvfp4_at_three_times_its_fp8_rate():
    """15 against 5 PFLOP/s dense on a GB300 (a GB200: 10 against 5). Neither GB300 format
    has a GEMM measurement, so both run at the named default share of their peak."""
    gb300 = hardware.device("gb300", "fp4", use="serving")
    assert gb300.gemm_flops == pytest.approx(
        3 * hardware.device("gb300", "fp8", use="serving").gemm_flops)


def test_an_nvl72_of_gb300s_is_one_nvlink_domain_with_800g_nics():
    for gpu, nic in (("gb300", 100e9), ("gb200", 50e9)):
        c = hardware.cluster(gpu)
        assert c.system.scale_up_accelerators == 72
        assert c.nic_bytes_per_s_per_gpu == pytest.approx(nic)
        assert hardware.fabric(c).gpus_per_node == 72
    b300 = hardware.cluster("b300")
    assert b300.system.accelerators_per_node == 8
    assert b300.nic_bytes_per_s_per_gpu == pytest.approx(100e9)
