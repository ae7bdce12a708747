"""simulate train's run: block at the terminal: bad input is one line naming the file and
the field, exit 2, before any plan search."""

from __future__ import annotations

import json
import math
import time

import pytest

from infraplan.cli import main
from infraplan.reliability.checkpoint import daly_interval_s

BASE = ("model: llama-3.1-8b\n"
        "training: {tokens: 1.0e11, global_batch: 256, seq_len: 4096}\n"
        "hardware: {gpus: [h100], counts: [64]}\n"
        "prices: {h100: 3.00}\n")


@pytest.mark.parametrize("tier", ["local-nvme-aws-p5", "local-nvme-8x-u2",
                                  "dgx-raid0"])  # an alias of local-nvme-8x-u2
def test_a_checkpoint_on_a_nodes_own_disk_is_refused(tmp_path, capsys, tier):
    """Regression: run.checkpoint_storage: local-nvme-aws-p5 printed 'checkpoint 987.75 GB to
    local-nvme-aws-p5 ... durable after 1.23 s' and 98.2% spot goodput for a 70B run on 512
    H100s, yet a checkpoint on the failed node's disk goes with it and a preemption takes
    every node. The catalog's kind (local-nvme), not the name, says so."""
    path = tmp_path / "s.yaml"
    path.write_text(BASE + f"run: {{checkpoint_storage: {tier}}}\n")
    start = time.perf_counter()
    code = main(["simulate", "train", str(path)])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and err.count("\n") == 1
    assert time.perf_counter() - start < 2  # before any plan search
    assert err.startswith(f"error: s.yaml: run.checkpoint_storage {tier!r} is a node's own "
                          "disk (kind: local-nvme in the storage catalog), so a checkpoint "
                          "there is not durable")
    assert err.rstrip().endswith(
        "to fix: write checkpoints to a shared tier: remove run.checkpoint_storage for the "
        "default, fsx-lustre-p2-1000, or name one of aws-efs-elastic, fsx-lustre-p2-125, "
        "ddn-exascaler-ai400x2, s3-standard, gcs-standard")


def test_shared_tiers_are_still_taken(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(BASE + "run: {checkpoint_storage: s3-standard, trials: 20, "
                           "strategies: [on_demand], optimise_interval: false}\n")
    assert main(["simulate", "train", str(path)]) == 0
    assert " to s3-standard blocks " in capsys.readouterr().out


def _simulate_json(tmp_path, capsys, run: str) -> dict:
    path = tmp_path / "s.yaml"
    path.write_text(BASE + f"run: {{strategies: [on_demand], optimise_interval: false{run}}}\n")
    assert main(["simulate", "train", str(path), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_failure_rate_per_gpu_is_a_run_key(tmp_path, capsys):
    """Every job used the Llama 3 405B H100 rate, 1.97e-5 per GPU-hour, whatever the fleet.
    run.failures_per_gpu_hour sets it: halving it doubles the job MTBF (64 GPUs at 1e-2 per
    GPU-hour: 5,625 s; at 5e-3: 11,250 s), stretches Daly's interval by about sqrt(2) and halves
    the failures per hour of running (E[K] = N r E[up], up = wall - K R on demand)."""
    default = _simulate_json(tmp_path, capsys, ", trials: 20")
    llama3_per_gpu_hour = 419 / (54 * 24 * 16384)
    assert default["failures"]["per_gpu_hour"] == pytest.approx(llama3_per_gpu_hour)
    assert default["failures"]["per_gpu_hour"] == pytest.approx(1.97e-5, rel=0.005)
    assert default["job_mtbf_s"] == pytest.approx(3600 / (64 * llama3_per_gpu_hour))
    runs = {rate: _simulate_json(tmp_path, capsys, f", trials: 400, failures_per_gpu_hour: "
                                                   f"{rate}") for rate in (1e-2, 5e-3)}
    fast, slow = runs[1e-2], runs[5e-3]
    assert (fast["job_mtbf_s"], slow["job_mtbf_s"]) == pytest.approx((5625.0, 11250.0))
    assert slow["failures"]["derivation"] == \
        "run.failures_per_gpu_hour: 0.005 per GPU-hour (one every 200 GPU-hours)"
    for out in (fast, slow):  # Daly's interval of the job's MTBF: ~sqrt(2) x longer
        assert out["checkpoint"]["daly_interval_s"] == pytest.approx(
            daly_interval_s(out["checkpoint"]["blocking_s"], out["job_mtbf_s"]))
    assert slow["checkpoint"]["daly_interval_s"] / fast["checkpoint"]["daly_interval_s"] \
        == pytest.approx(math.sqrt(2), rel=0.001)
    failures = {}
    for rate, out in runs.items():
        d = out["strategies"]["on_demand"]
        failures[rate] = d["interruptions"]["mean"]
        up_s = d["wall_s"]["mean"] - out["restart_s"] * failures[rate]
        # ~28 and ~14 failures a trial over 400 trials: 1-1.4% noise
        assert failures[rate] / up_s == pytest.approx(64 * rate / 3600, rel=0.05)
    assert failures[5e-3] / failures[1e-2] == pytest.approx(0.5, rel=0.05)


@pytest.mark.parametrize("value, expected", [
    ("0", "must be > 0 (got 0)"), ("-2.0e-5", "must be > 0 (got -2e-05)"),
    (".inf", "must be a finite number (got inf)"),
    ("true", "must be a number, not a true/false value (got True)")])
def test_a_failure_rate_must_be_a_positive_number(tmp_path, capsys, value, expected):
    path = tmp_path / "s.yaml"
    path.write_text(BASE + f"run: {{failures_per_gpu_hour: {value}}}\n")
    assert main(["simulate", "train", str(path)]) == 2
    err = capsys.readouterr().err
    assert err == f"error: s.yaml: run.failures_per_gpu_hour {expected}\n"
