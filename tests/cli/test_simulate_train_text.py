"""What simulate train's terminal and JSON views call each figure: Daly's interval apart
from the interval used, and which tail of each distribution is shown."""

from __future__ import annotations

import json

import pytest

from infraplan.cli import main
from infraplan.reliability.checkpoint import daly_interval_s

LLAMA_405B = ("model: llama-3.1-405b\n"
              "training: {tokens: 15.6e12, global_batch: 2048, seq_len: 8192}\n"
              "hardware: {gpus: [h100], counts: [16384]}\n"
              "prices: {h100: 2.00}\n")


def _run(tmp_path, capsys, scenario: str, *flags: str) -> str:
    path = tmp_path / "s.yaml"
    path.write_text(scenario)
    assert main(["simulate", "train", str(path), *flags]) == 0
    return capsys.readouterr().out


def test_daly_is_not_the_upload_it_is_raised_to(tmp_path, capsys):
    """405B on 16,384 H100s printed 'Daly: 0.9 min' and JSON checkpoint.daly_interval_s
    56.8 s: the 5.68 TB upload, the floor of the interval. Daly's formula gives 17.6 s for
    the 0.0139 s blocking copy and the job's 11,135 s MTBF."""
    run = "run: {{trials: 20, strategies: [on_demand]{}}}\n"
    scenario = LLAMA_405B + run.format("")
    data = json.loads(_run(tmp_path, capsys, scenario, "--json"))
    cp, mtbf_s = data["checkpoint"], data["job_mtbf_s"]
    assert mtbf_s == pytest.approx(11135, abs=1)
    assert cp["daly_interval_s"] == pytest.approx(daly_interval_s(cp["blocking_s"], mtbf_s))
    assert cp["daly_interval_s"] == pytest.approx(17.6, abs=0.05)
    assert cp["write_s"] == pytest.approx(56.8, abs=0.05)
    assert "interval_s" not in cp  # each strategy's interval_s is the one its runs used
    on_demand = data["strategies"]["on_demand"]
    assert on_demand["daly_interval_s"] == on_demand["scan"]["daly_interval_s"] \
        == pytest.approx(cp["daly_interval_s"])
    assert on_demand["scan"]["upload_s"] == pytest.approx(cp["write_s"])
    assert min(on_demand["scan"]["intervals_s"]) == pytest.approx(cp["write_s"])
    out = _run(tmp_path, capsys, scenario)
    assert ("on-demand mean goodput vs checkpoint interval (Daly 17.6 s, raised to the "
            "56.8 s upload: a checkpoint cannot start before the last one is uploaded):"
            ) in out
    assert "Daly: 0.9 min" not in out
    # not scanned: the table names the upload as the interval's source, and says why
    once = _run(tmp_path, capsys, LLAMA_405B + run.format(", optimise_interval: false"))
    assert "56.8 s (upload)" in once
    assert ("on-demand checkpoints every 56.8 s: Daly 17.6 s, raised to the 56.8 s upload: "
            "a checkpoint cannot start before the last one is uploaded") in once


LLAMA_8B = ("model: llama-3.1-8b\n"
            "training: {tokens: 1.0e11, global_batch: 256, seq_len: 4096}\n"
            "hardware: {gpus: [h100], counts: [64]}\n"
            "prices: {h100: 3.00}\n"
            "run: {trials: 300, failures_per_gpu_hour: 2.0e-3}\n")


def test_each_distribution_shows_its_bad_tail_and_says_what_each_column_is(tmp_path, capsys):
    """JSON goodput.p90 was the good tail (0.951 above p50 0.930) beside wall_s.p90, the bad
    one; the terminal's interruptions columns were means beside p50 columns, unlabelled.
    Goodput now gives p10 (1 trial in 10 is lower) and the mean columns say so."""
    import numpy as np

    from infraplan.reliability.montecarlo import Stat

    assert Stat.of(np.arange(1.0, 12.0)) == Stat(p10=2.0, p50=6.0, p90=10.0, mean=6.0)
    data = json.loads(_run(tmp_path, capsys, LLAMA_8B, "--json"))
    for name, d in data["strategies"].items():
        assert set(d["goodput"]) == {"p10", "p50", "mean"}, name
        for key in ("wall_s", "cost_usd", "interruptions", "preemptions"):
            assert set(d[key]) == {"p50", "p90", "mean"}, (name, key)
        assert d["goodput"]["p10"] < d["goodput"]["p50"] < 1
        assert d["wall_s"]["p90"] > d["wall_s"]["p50"]
        # the same trials' tail: goodput = work / wall, a decreasing map
        assert d["goodput"]["p10"] == pytest.approx(data["work_s"] / d["wall_s"]["p90"],
                                                    rel=1e-3)
    out = _run(tmp_path, capsys, LLAMA_8B)
    header = next(line for line in out.splitlines() if line.startswith("strategy "))
    assert header.rstrip().endswith("cost p90  interruptions mean  preemptions mean")
    assert ("p50: the median trial; p90: 1 trial in 10 runs longer or costs more; "
            "goodput p10: 1 trial in 10 has less (the median trial of a rarely interrupted "
            "run has no failure); interruptions (failures and preemptions) and preemptions: "
            "means over the trials") in out
    assert "of them preemptions" not in out
    quiet = _run(tmp_path, capsys, LLAMA_8B, "--quiet")
    assert quiet.startswith("on-demand: ") and quiet.rstrip().endswith(" (p50)")


def _scenario(model: str, gpu: str, count: int, run: str) -> str:
    return (f"model: {model}\n"
            "training: {tokens: 2.0e10, global_batch: 256, seq_len: 4096}\n"
            f"hardware: {{gpus: [{gpu}], counts: [{count}]}}\n"
            f"run: {{trials: 100{run}}}\n")


def test_spot_notice_is_the_providers_of_the_spot_offer_rented(tmp_path, capsys):
    """A GCP TPU spot run used AWS's 120 s notice. The notice now comes from the provider
    of the catalog's spot offer (catalog/data/reliability.yaml): GCP 30 s, Azure 30 s, AWS
    120 s, AWS's for a provider without a row; the preemption rate stays AWS's figure, and
    the output says whose each is."""
    tpu = json.loads(_run(tmp_path, capsys, _scenario("llama-3.1-8b", "tpu-v5e", 64, ""),
                          "--json"))
    assert tpu["spot"]["provider"] == "gcp" and tpu["spot"]["notice_s"] == 30
    assert tpu["spot"]["notice"] == "gcp's"
    assert tpu["spot"]["monthly_interrupted_fraction"] == pytest.approx(0.15)
    assert tpu["spot"]["preemption_rate"] == (
        "AWS's figure, an ESTIMATE from the Spot Instance Advisor's 10-20% bands for H100 "
        "(p5) instances; the catalog has none for gcp")
    out = _run(tmp_path, capsys, _scenario("llama-3.1-8b", "tpu-v5e", 64, ""))
    assert ("spot capacity (taken as gcp's, the catalog's cheapest spot offer for tpu-v5e): "
            "notice 30 s, gcp's; preemptions of 15% of nodes a month, AWS's figure") in out
    h100 = json.loads(_run(tmp_path, capsys, _scenario("llama-3.1-8b", "h100", 64, ""),
                           "--json"))
    assert (h100["spot"]["provider"], h100["spot"]["notice_s"]) == ("nebius", 120)
    assert h100["spot"]["notice"] == "AWS's (the catalog has no spot notice for nebius)"


def test_a_notice_shorter_than_the_upload_makes_preemptions_lose_work(tmp_path, capsys):
    """70B on 128 A100s rents Azure spot (30 s notice); its checkpoint is durable 79 s
    after the snapshot (FSx for Lustre 125), so a preempted node goes before it lands and
    the work since the last one is lost: spot's Daly interval counts the preemptions, 602 s
    against on-demand's 938 s. With AWS's 120 s, the old default for every provider, a
    preemption was saved and the two were equal."""
    run = ", checkpoint_storage: fsx-lustre-p2-125, optimise_interval: false"
    azure = json.loads(_run(tmp_path, capsys, _scenario("llama-3.1-70b", "a100-sxm4-80gb",
                                                        128, run), "--json"))
    assert (azure["spot"]["provider"], azure["spot"]["notice_s"]) == ("azure", 30)
    assert azure["checkpoint"]["write_s"] == pytest.approx(79.0, abs=0.1)
    spot, on_demand = azure["strategies"]["spot"], azure["strategies"]["on_demand"]
    assert on_demand["daly_interval_s"] == pytest.approx(937.8, abs=0.1)
    assert spot["daly_interval_s"] == pytest.approx(601.6, abs=0.1)
    given = json.loads(_run(tmp_path, capsys, _scenario(
        "llama-3.1-70b", "a100-sxm4-80gb", 128, run + ", spot: {notice_s: 120}"), "--json"))
    assert given["spot"]["notice"] == "run.spot.notice_s" and given["spot"]["notice_s"] == 120
    assert given["strategies"]["spot"]["daly_interval_s"] == pytest.approx(
        on_demand["daly_interval_s"])
