"""A cost of compute alone says what it leaves out (an audit read the Llama 70B report's
$1,924,810, one compute line, as the run's cost, while the scenario names a checkpoint tier
and the Yield plan writes 988 GB checkpoints to it)."""

from __future__ import annotations

import json
from pathlib import Path

from infraplan.cli import main
from infraplan.economics.cost import CostInputs, unbilled_note

ROOT = Path(__file__).parents[2]


def test_each_kind_left_out_is_named_with_the_key_that_bills_it():
    assert unbilled_note(CostInputs()) == (
        "not billed: storage (costs.dataset_gb, costs.checkpoint_gb), egress "
        "(costs.egress_gb), networking (costs.networking_usd_per_month) and monitoring "
        "(costs.monitoring_usd_per_month); set those keys to add them")
    # a serving deployment writes no checkpoints: its storage is the data alone
    assert unbilled_note(CostInputs(egress_gb=500, monitoring_usd_per_month=200,
                                    networking_usd_per_hour=0.5), checkpoints=False) == (
        "not billed: storage (costs.dataset_gb); set that key to add it")
    assert unbilled_note(CostInputs(checkpoint_gb=10, egress_gb=1, networking_usd_per_month=1,
                                    monitoring_usd_per_hour=1)) == ""


def test_plan_train_carries_it_in_json(capsys):
    # the text prints it under the cost line: test_energy_host.py's run of the same file
    example = str(ROOT / "examples" / "train-llama-3.1-70b.yaml")
    assert main(["plan", "train", example, "--json"]) == 0
    best = json.loads(capsys.readouterr().out)["best"][0]
    assert best["economics"]["unbilled_note"] == unbilled_note(CostInputs())
