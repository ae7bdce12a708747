"""Achievable kernel rates from the catalog's measurements (physics/hardware.py)."""

from __future__ import annotations

import dataclasses

import pytest

from infraplan.catalog import load_catalog
from infraplan.catalog.table import Table
from infraplan.errors import InputError
from infraplan.physics import hardware
from infraplan.physics.hardware import calibration


# (chip, its compute twin, chip's achievable memory bandwidth, twin's)
TWINS = [
    # H200 HBM3e 4.15 TB/s and H100 HBM3 2.97 TB/s measured (measurements.yaml)
    ("h200-sxm-141gb", "h100-sxm5-80gb", 4.15e12, 2.97e12),
    # same GA100 die, 108 SMs, 1410 MHz boost and 400 W on both SXM4 boards (datasheet);
    # the 40GB's HBM2 (1,555 GB/s) has no measurement: the default streaming fraction
    ("a100-sxm4-40gb", "a100-sxm4-80gb", 1555e9 * calibration("default-memory-fraction"),
     1.70e12),
    # export parts: the H800 is an H100 SXM5 with NVLink and FP64 cut (FlashMLA streams
    # 3000 GB/s on it), the A800 an A100 with NVLink cut (no HBM measurement of its own)
    ("h800-sxm5-80gb", "h100-sxm5-80gb", 3.0e12, 2.97e12),
    ("a800-sxm4-80gb", "a100-sxm4-80gb", 2039e9 * calibration("default-memory-fraction"),
     1.70e12),
]


@pytest.mark.parametrize("use", ["training", "serving"])
@pytest.mark.parametrize(("chip", "twin", "chip_memory", "twin_memory"), TWINS)
def test_a_compute_twin_shares_kernel_rates_but_not_memory_bandwidth(
        use, chip, twin, chip_memory, twin_memory):
    ours = hardware.device(chip, "bf16", use=use)
    theirs = hardware.device(twin, "bf16", use=use)
    assert ours.gemm_flops == pytest.approx(theirs.gemm_flops)
    assert ours.attention_flops == pytest.approx(theirs.attention_flops)
    assert ours.memory_bytes_per_s == pytest.approx(chip_memory)
    assert theirs.memory_bytes_per_s == pytest.approx(twin_memory)


def test_h100_trains_with_the_attention_its_stack_picks_and_serves_with_the_fastest():
    # Transformer Engine's default on Hopper is cuDNN: forward 595 and backward 516 TFLOP/s
    # on one problem (Shah et al. 2024, Figs. 5c and 6b), not FlashAttention-3's 648 / 561;
    # engines' prefill keeps the fastest forward (FA3, head dim 256: 756, Fig. 5e)
    train = hardware.device("h100-sxm5-80gb", "bf16", use="training")
    serve = hardware.device("h100-sxm5-80gb", "bf16", use="serving")
    derate = calibration("training-derate")
    assert train.attention_flops == pytest.approx(595e12 * derate)
    assert train.attention_backward_flops == pytest.approx(516e12 * derate)
    assert serve.attention_flops == pytest.approx(756e12 * calibration("serving-derate"))


def test_without_a_stack_default_training_takes_the_best_published_attention():
    # A100: no row is marked, so FlashAttention-2's best fwd+bwd, 203 TFLOP/s (Dao 2023), for
    # both passes: its best forward (230) comes from another problem of the sweep
    dev = hardware.device("a100-sxm4-80gb", "bf16")
    assert dev.attention_flops == pytest.approx(203e12 * calibration("training-derate"))
    assert dev.attention_backward_flops == pytest.approx(dev.attention_flops)


def test_b200_trains_at_cudnn_and_serves_at_flashattention_4():
    # cuDNN 9.10.2 forward 1419 and backward 1108.7 TFLOP/s on one problem (NVIDIA/
    # cudnn-frontend SDPA benchmark, B200); engines' prefill: FlashAttention-4's forward,
    # 1613 (Zadouri et al. 2026)
    train = hardware.device("b200-sxm-180gb", "bf16", use="training")
    serve = hardware.device("b200-sxm-180gb", "bf16", use="serving")
    derate = calibration("training-derate")
    assert train.attention_flops == pytest.approx(1419e12 * derate)
    assert train.attention_backward_flops == pytest.approx(1108.7e12 * derate)
    assert serve.attention_flops == pytest.approx(1613e12 * calibration("serving-derate"))


def test_a_chip_with_forward_attention_only_trains_its_backward_at_the_ratio(monkeypatch):
    # B200 without its cuDNN rows: FlashAttention-4's forward 1613 TFLOP/s is all there is
    catalog = load_catalog()
    rows = tuple(m for m in catalog.measurements
                 if not (m.target == "b200-sxm-180gb" and "cudnn" in m.name))
    monkeypatch.setattr(hardware, "load_catalog",
                        lambda: dataclasses.replace(catalog, measurements=rows))
    hardware.device.cache_clear()
    try:
        train = hardware.device("b200-sxm-180gb", "bf16", use="training")
    finally:
        hardware.device.cache_clear()
    ratio = calibration("attention-backward-forward-ratio")
    derate = calibration("training-derate")
    assert train.attention_flops == pytest.approx(1613e12 * derate)
    assert train.attention_backward_flops == pytest.approx(1613e12 * ratio * derate)


def test_the_backward_ratio_matches_its_published_pairs():
    # same-problem pairs in measurements.yaml (head dim 128, seqlen 16k, no causal mask)
    rows = {m.name: m.achieved_flops for m in load_catalog().measurements}
    pairs = [("h100-fa3-bwd-hd128-fp16-fa3paper", "h100-fa3-fwd-hd128-fp16-fa3paper"),
             ("h100-cudnn-bwd-hd128-fp16-fa3paper", "h100-cudnn-fwd-hd128-fp16-fa3paper"),
             ("h100-fa2-bwd-hd128-fp16-fa3paper", "h100-fa2-fwd-hd128-fa3paper")]
    ratio = calibration("attention-backward-forward-ratio")
    for backward, forward in pairs:
        assert rows[backward] / rows[forward] == pytest.approx(ratio, abs=0.01)


def test_a_twin_with_other_peaks_is_refused():
    catalog = load_catalog()
    broken = catalog.accelerators.get("h200-sxm-141gb").model_copy(
        update={"compute_twin": "a100-sxm4-80gb"})
    rows = [broken if row.name == broken.name else row for row in catalog.accelerators]
    fake = dataclasses.replace(catalog, accelerators=Table("accelerators", rows))
    with pytest.raises(InputError, match="compute twin"):
        fake.check_references()


def test_a_twin_may_differ_in_fp64_alone():
    """The H800's FP64 is cut to about 1 TFLOP/s; its tensor peaks are the H100's."""
    catalog = load_catalog()
    h800, h100 = (catalog.accelerators.get(n) for n in ("h800", "h100"))
    assert h800.compute_twin == h100.name
    assert h800.peak_flops["fp64"] < h100.peak_flops["fp64"] / 50
    catalog.check_references()
    bf16 = dict(h800.peak_flops, bf16=h100.peak_flops["bf16"] * 0.9)
    broken = h800.model_copy(update={"peak_flops": bf16})
    rows = [broken if row.name == broken.name else row for row in catalog.accelerators]
    fake = dataclasses.replace(catalog, accelerators=Table("accelerators", rows))
    with pytest.raises(InputError, match="compute twin"):
        fake.check_references()


def test_export_nodes_run_collectives_on_their_cut_nvlink():
    """HGX H800 and HGX A800 carry 400 GB/s of NVLink both ways per GPU, not 900 / 600:
    without an NCCL measurement of their own, 200 GB/s each way at the default bus share."""
    share = calibration("default-intra-node-bus-fraction")
    for gpu in ("h800", "a800"):
        fab = hardware.fabric(hardware.cluster(gpu))
        assert fab.gpus_per_node == 8
        assert fab.intra_bytes_per_s == pytest.approx(200e9 * share)
    assert hardware.fabric(hardware.cluster("h100")).intra_bytes_per_s > 1.8 * 200e9 * share


def test_attention_backward_runs_at_its_own_rate_or_the_forwards():
    from infraplan.physics.compute import Device, attention_time
    dev = Device(gemm_flops=1e15, attention_flops=600e12, memory_bytes_per_s=3e12,
                 compute_units=None, kernel_overhead_s=0.0, attention_backward_flops=500e12)
    assert attention_time(dev, 6e12) == pytest.approx(0.010)
    assert attention_time(dev, 6e12, backward=True) == pytest.approx(0.012)
    unset = dataclasses.replace(dev, attention_backward_flops=0.0)
    assert attention_time(unset, 6e12, backward=True) == pytest.approx(0.010)
