"""simulate train's run: block at the terminal: bad input is one line naming the file and
the field, exit 2, before any plan search."""

from __future__ import annotations

import time

import pytest

from infraplan.cli import main

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
