"""The export parts (H800, A800, H20): what their catalog rows change in a plan."""

from __future__ import annotations

import pytest

from infraplan.models import load_model
from infraplan.physics import hardware
from infraplan.serving.deployment import Deployment, resolve
from infraplan.training.evaluate import TrainingJob, evaluate_plan
from infraplan.training.plan import ParallelPlan


def test_tensor_parallel_collectives_cost_an_h800_the_nvlink_it_lost():
    """Llama 3.1 70B at TP 8: the same GEMMs on both chips (compute twins), but the H800's
    TP collectives take as much longer as its NVLink is slower (200 GB/s each way at the
    default bus share against the H100's measured NCCL rate)."""
    arch = load_model("llama-3.1-70b")
    job = TrainingJob(seq_len=8192, global_batch=64, precision="bf16")
    plan = ParallelPlan(tp=8, dp=8, zero=3, micro_batch=1, recompute="full")
    h100, h800 = (evaluate_plan(arch, gpu, job, plan) for gpu in ("h100", "h800"))
    assert h800.breakdown_s["compute"] == pytest.approx(h100.breakdown_s["compute"], rel=2e-3)
    links = (hardware.fabric(hardware.cluster("h100")).intra_bytes_per_s
             / hardware.fabric(hardware.cluster("h800")).intra_bytes_per_s)
    assert links > 2.0
    assert h800.breakdown_s["tp_comm"] / h100.breakdown_s["tp_comm"] == pytest.approx(
        links, rel=0.05)
    assert h800.step_s > h100.step_s + 0.9 * (links - 1) * h100.breakdown_s["tp_comm"]


def _step(gpu: str):
    return resolve(Deployment(model="llama-3.1-8b", gpu=gpu, weight_dtype="fp8",
                              kv_dtype="fp8")).step


def test_an_h20_decodes_faster_than_an_h100_and_prefills_several_times_slower():
    """The H20 keeps more HBM bandwidth than an H100 (4.0 against 3.35 TB/s) and a seventh of
    its tensor rate (296 against 1,979 TFLOP/s fp8)."""
    h20, h100 = _step("h20"), _step("h100")
    derate = hardware.calibration("serving-derate")
    assert hardware.device("h20", "fp8", use="serving").gemm_flops == pytest.approx(
        296e12 * hardware.calibration("default-gemm-fraction") * derate)
    # one sequence decoding streams the weights: bandwidth-bound
    assert h20.decode_coefficients(1)[0] < h100.decode_coefficients(1)[0]
    # an 8,192-token prefill is GEMM-bound
    gemm_ratio = (hardware.device("h100", "fp8", use="serving").gemm_flops
                  / hardware.device("h20", "fp8", use="serving").gemm_flops)
    assert 4.0 < h20.linear_s[8192] / h100.linear_s[8192] <= gemm_ratio * 1.01


def test_the_export_parts_have_their_nodes():
    for gpu, node, nvlink in (("h800", "hgx-h800", 200e9), ("a800", "hgx-a800", 200e9),
                              ("h20", "hgx-h20", 450e9)):
        c = hardware.cluster(gpu)
        assert c.system.name == node and c.system.accelerators_per_node == 8
        assert c.system.intra_node_bandwidth_bytes_per_s_per_direction == nvlink
