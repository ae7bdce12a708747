"""The article's worked examples (docs/worked-examples.md) run, and the conclusions the page
draws from them still follow from infraplan's numbers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infraplan.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _run(capsys, *argv):
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_fine_tune_takes_weeks_not_ten_thousand_gpu_hours(capsys):
    best = _run(capsys, "plan", "train",
                str(EXAMPLES / "article-1-finetune-7b.yaml"))["best"][0]
    assert 7 < best["time_to_train_s"] / 86400 < 28  # "2 weeks" is the right order
    assert best["gpu_hours"] < 10_000 / 10  # "10K GPU-hours" is off by more than 10x
    storage = sum(i["usd"] for i in best["economics"]["cost"]["items"]
                  if i["name"].startswith("storage"))
    months = best["time_to_train_s"] / (30.44 * 86400)
    assert storage / months < 50  # the article's $50 a month needs ~2 TB stored


def test_70b_on_32_h100_needs_far_more_than_the_articles_gpu_hours(capsys):
    best = _run(capsys, "plan", "train",
                str(EXAMPLES / "article-2-train-70b-32xh100.yaml"))["best"][0]
    assert best["gpu_hours"] > 3 * 78_125
    assert best["time_to_train_s"] / 86400 > 3 * 3.7 * 30.44
    four_days_kwh = best["economics"]["energy_kwh"] * 4 * 86400 / best["time_to_train_s"]
    assert four_days_kwh < 500_000 / 50  # "500-600 MWh for 4 days" is ~100x too high


def test_70b_region_plan_and_the_one_h100_claim(capsys):
    plan = _run(capsys, "plan", "serve", str(EXAMPLES / "article-3-serve-70b-100k-users.yaml"))
    best = plan["best"]
    gpus = best["deployment"]["replicas"] * best["deployment"]["tp"]
    assert gpus >= 2  # one H100 cannot serve a region's 20K users ("20K users per H100")
    assert best["ttft_p99_s"] <= 2.0 and best["tpot_p99_s"] <= 0.05
    sim = _run(capsys, "simulate", "serve",
               str(EXAMPLES / "article-5-one-h100-1000-users.yaml"))
    assert sim["ttft_s"]["p99"] <= 1.0 and sim["tpot_s"]["p99"] <= 0.05


@pytest.mark.parametrize("name", ["article-4-2b-spot.yaml"])
def test_reserved_plus_spot_saves_and_async_checkpoints_block_less(capsys, name):
    run = _run(capsys, "simulate", "train", str(EXAMPLES / name))
    s = run["strategies"]
    saving = 1 - s["reserved_plus_spot"]["cost_usd"]["mean"] / s["on_demand"]["cost_usd"]["mean"]
    assert 0.2 <= saving <= 0.5
    assert run["checkpoint"]["blocking_s"] < run["checkpoint"]["write_s"]


def test_qlora_70b_does_not_fit_24_gb(capsys):
    assert main(["memory", str(EXAMPLES / "article-5-qlora-70b-24gb.yaml")]) == 0
    assert "DOES NOT FIT" in capsys.readouterr().out
