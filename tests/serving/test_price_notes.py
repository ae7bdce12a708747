"""A plan whose rows price one accelerator differently says why (an audit saw 2 x 1 A100 at
$2.78/h and 1 x 2 A100 at $3.58/h in one table, with no basis for the $1.39 vs $1.79 a
GPU-hour): a replica's GPUs rent in one instance, and larger instances cost more."""

from __future__ import annotations

from pathlib import Path

import yaml

from infraplan.economics.instances import rent
from infraplan.scenario_files import load_scenario
from infraplan.serving.planner import plan_serving
from infraplan.serving.deployment import Deployment
from infraplan.serving.scenario import ServeScenario, replica_footprint

CHAT = Path(__file__).parents[2] / "examples" / "serve-llama8b-chat.yaml"


def test_each_replica_size_names_its_offer(tmp_path):
    raw = yaml.safe_load(CHAT.read_text())
    raw.pop("deployment", None)
    raw["traffic"]["num_requests"] = 1000
    raw["search"] = {"gpus": ["a100-sxm4-80gb"], "tp": [1, 2], "weight_dtypes": ["bf16"]}
    path = tmp_path / "a100.yaml"
    path.write_text(yaml.safe_dump(raw))
    plan = plan_serving(load_scenario(path, ServeScenario))
    assert {c.deployment.tp for c in plan.ranked} == {1, 2}
    one, two = (rent("a100-sxm4-80gb", "on_demand", replica_footprint(Deployment(
        model="llama-3.1-8b", gpu="a100-sxm4-80gb", tp=n))) for n in (1, 2))
    assert one.usd_per_gpu_hour < two.usd_per_gpu_hour  # the catalog's, as the rows bill
    assert plan.price_notes == [
        "a100-sxm4-80gb's price a GPU-hour depends on the replica's size, as its GPUs rent in "
        f"one instance: ${one.usd_per_gpu_hour:,.2f}/GPU-h from 1-GPU replicas "
        f"({one.basis()}); ${two.usd_per_gpu_hour:,.2f}/GPU-h from 2-GPU replicas "
        f"({two.basis()})"]


def test_the_scenarios_own_price_is_one_price_and_needs_no_note(tmp_path):
    raw = yaml.safe_load(CHAT.read_text())
    raw.pop("deployment", None)
    raw["traffic"]["num_requests"] = 1000
    raw["search"] = {"gpus": ["a100-sxm4-80gb"], "tp": [1, 2], "weight_dtypes": ["bf16"]}
    raw["prices"] = {"a100-sxm4-80gb": 2.0}
    path = tmp_path / "own.yaml"
    path.write_text(yaml.safe_dump(raw))
    plan = plan_serving(load_scenario(path, ServeScenario))
    assert {c.deployment.tp for c in plan.ranked} == {1, 2}
    assert plan.price_notes == []
