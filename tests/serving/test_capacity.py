"""A deployment's capacity (a saturated run) and how the views use it: the load the traffic
asks for as a share of it, and the sweep's sustained throughput."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

from infraplan.cli import main
from infraplan.report.document_serve import serving_document
from infraplan.serving.capacity import capacity_summary, saturated_requests_per_s
from infraplan.serving.deployment import Deployment, resolve
from infraplan.serving.scenario import ServeScenario
from infraplan.serving.simulate import simulate
from infraplan.serving.traffic import Requests

# one sequence at a time: about 6 requests/s of these lengths, whatever the traffic
SLOW = {"model": "llama-3.1-8b",
        "traffic": {"arrival": {"kind": "poisson", "rate_per_s": 50}, "num_requests": 400,
                    "input": {"kind": "fixed", "value": 200},
                    "output": {"kind": "fixed", "value": 20}},
        "slo": {"ttft_p99_s": 1.0},
        "deployment": {"gpu": "h100", "max_num_seqs": 1, "max_num_batched_tokens": 100}}


def _replica(**extra):
    return resolve(Deployment(model="llama-3.1-8b", gpu="h100", max_num_seqs=1,
                              max_num_batched_tokens=100, **extra))


def test_an_overloaded_run_completes_requests_at_the_capacity():
    """Offered 8 times what it serves, the run's completions over its makespan are the
    saturated rate (the queue never empties, so the drain runs at full speed too)."""
    replica = _replica()
    arrivals = np.cumsum(np.random.default_rng(0).exponential(1 / 50, 400))
    requests = Requests(arrivals, np.full(400, 200), np.full(400, 20))
    run = simulate(replica.deployment, requests, resolved=replica)
    completed_per_s = run.completed.sum() / (np.nanmax(run.finish_s) - arrivals[0])
    cap = capacity_summary(replica, requests, 1, 50.0)
    assert cap["requests_per_s"] == pytest.approx(completed_per_s, rel=0.03)
    assert cap["utilization"] == pytest.approx(50.0 / cap["requests_per_s"])
    assert cap["text"] == (f"{cap['requests_per_s']:,.3g} requests/s when saturated; offered "
                           f"50 requests/s is {cap['utilization']:.0%} of it, more than it "
                           "completes: the queue grows")


def test_capacity_counts_every_replica_and_an_offline_batch_has_no_share():
    replica = _replica()
    requests = Requests(np.zeros(64), np.full(64, 200), np.full(64, 20))
    one = saturated_requests_per_s(replica, requests)
    two = capacity_summary(replica, requests, 2, float("inf"))
    assert two["requests_per_s"] == pytest.approx(2 * one, rel=1e-12)
    assert two["utilization"] is None and two["offered_requests_per_s"] is None
    assert two["text"] == f"{2 * one:,.3g} requests/s when saturated"
    diurnal = capacity_summary(replica, requests, 1, 3.0, "curve peak")
    assert "; the diurnal curve's peak 3 requests/s is " in diurnal["text"]


def test_the_sweep_sustains_the_offered_rate_below_capacity_and_the_capacity_above():
    """The sweep's 'served' column was the short run's completions over its makespan, which
    the drain after the last arrival holds below the offered rate even where the deployment
    keeps up (6.5 of 10 requests/s for a Llama 70B plan meeting its SLOs)."""
    fast = dict(SLOW, deployment={"gpu": "h100"}, slo={"ttft_p99_s": 60.0},
                traffic=dict(SLOW["traffic"], arrival={"kind": "poisson", "rate_per_s": 8},
                             output={"kind": "fixed", "value": 1000}))
    for raw, keeps_up in ((fast, True), (SLOW, False)):
        doc = serving_document(ServeScenario.model_validate(raw), plan=False, sweep=True,
                               sweep_requests=200)
        items = {i["label"]: i for sec in doc["sections"] for i in sec["items"]}
        capacity = items["capacity"]["value"]
        for p in doc["load_sweep"]:
            assert p["sustained_requests_per_s"] == min(p["rate_per_s"], capacity)
        if keeps_up:  # each point below capacity runs the planner's steady-state window,
            # whose completions a second lag the offered rate only by the drain: the short
            # runs lagged it by over 3 %, the window's count is within 5 % of it either way
            # (Poisson arrivals: 400 requests at the lowest rate)
            assert all(p["keeps_up"] and p["meets_slo"] and p["steady_window"]
                       for p in doc["load_sweep"])
            assert all(abs(p["requests_per_s"] / p["rate_per_s"] - 1) < 0.05
                       for p in doc["load_sweep"])
        else:  # each point over: sustained and completed agree on the capacity, and no
            # point meets the SLOs, however short its run
            for p in doc["load_sweep"]:
                assert p["requests_per_s"] == pytest.approx(capacity, rel=0.05)
                assert not p["keeps_up"] and not p["meets_slo"]
            assert doc["sections"][[s["heading"] for s in doc["sections"]].index(
                "Load-test")]["tables"][0]["rows"][0][-1] == "no (over capacity)"
        headers = doc["sections"][[s["heading"] for s in doc["sections"]].index("Load-test")]
        assert headers["tables"][0]["columns"][:3] == [
            "offered requests/s", "sustained requests/s", "completions/s in the run"]


def test_simulate_serve_prints_the_capacity_and_the_share_offered(tmp_path, capsys):
    path = tmp_path / "slow.yaml"
    path.write_text(yaml.safe_dump(SLOW))
    assert main(["simulate", "serve", str(path), "--json"]) == 0
    cap = json.loads(capsys.readouterr().out)["capacity"]
    assert cap["offered_requests_per_s"] == 50 and cap["utilization"] > 8
    assert main(["simulate", "serve", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"capacity: {cap['text']}" in out
    assert "throughput: " in out and "(over the run, its drain included)" in out


def test_the_busy_share_is_named_for_what_it_counts(tmp_path, capsys):
    """An engine steps whenever a request is in flight: the chat example showed 'GPUs busy
    97.4%' beside 'offered 20 requests/s is 36% of it'. The share is named for what it
    counts, in the CLI and the report."""
    raw = dict(SLOW, deployment={"gpu": "h100"},
               traffic=dict(SLOW["traffic"], arrival={"kind": "poisson", "rate_per_s": 20}))
    path = tmp_path / "light.yaml"
    path.write_text(yaml.safe_dump(raw))
    assert main(["simulate", "serve", str(path), "--json"]) == 0
    busy = json.loads(capsys.readouterr().out)["gpu_busy_fraction"]
    assert main(["simulate", "serve", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"; engines stepping {busy:.1%} of the time" in out and "GPUs busy" not in out
    doc = serving_document(ServeScenario.model_validate(raw), plan=False, sweep=False)
    items = {i["label"]: i for sec in doc["sections"] for i in sec["items"]}
    assert items["engines stepping"]["text"].startswith(f"{busy:.1%} of the time (a batch")
    assert "GPUs busy" not in items


def test_simulate_serve_json_gives_the_deployment_as_simulated(tmp_path, capsys):
    """--json gave the scenario's deployment ('gpu': 'h100', 'max_num_seqs': null) while
    the text showed the catalog name and the engine's limits; the header named no model."""
    raw = dict(SLOW, deployment={"gpu": "h100"})
    path = tmp_path / "light.yaml"
    path.write_text(yaml.safe_dump(raw))
    assert main(["simulate", "serve", str(path), "--json"]) == 0
    dep = json.loads(capsys.readouterr().out)["deployment"]
    resolved = resolve(Deployment(model=SLOW["model"], gpu="h100"))
    assert (dep["gpu"], dep["kv_dtype"], dep["max_num_seqs"], dep["max_num_batched_tokens"],
            dep["block_size"], dep["chunked_prefill"], dep["kv_policy"]) == (
        "h100-sxm5-80gb", "bf16", resolved.max_num_seqs, resolved.max_num_batched_tokens,
        resolved.memory.block_size, resolved.chunked_prefill, resolved.kv_policy)
    assert main(["simulate", "serve", str(path)]) == 0
    assert capsys.readouterr().out.split(": ", 1)[1].startswith(
        f"{SLOW['model']} on 1 x 1 x h100-sxm5-80gb, vllm, weights bf16, KV bf16, "
        f"max_num_seqs {resolved.max_num_seqs},")


@pytest.mark.parametrize("start_hour, noted", [(0, True), (14, False), (13.9, False)])
def test_a_diurnal_run_that_misses_the_peak_says_so(tmp_path, capsys, start_hour, noted):
    """2,000 requests of a curve at 2 requests/s at night and 12 at 14:00 arrive in the
    first 17 minutes after midnight: the run never sees the peak, and said nothing."""
    raw = dict(SLOW, deployment={"gpu": "h100"}, traffic=dict(
        SLOW["traffic"], num_requests=2000, arrival={
            "kind": "diurnal", "curve": [[0, 2], [8, 4], [14, 12], [20, 6]],
            "start_hour": start_hour}))
    path = tmp_path / "diurnal.yaml"
    path.write_text(yaml.safe_dump(raw))
    assert main(["simulate", "serve", str(path), "--json"]) == 0
    notes = json.loads(capsys.readouterr().out)["notes"]
    said = [n for n in notes if "not its peak of 12 requests/s at hour 14" in n]
    assert bool(said) == noted
    if noted:
        assert said[0].startswith("the 2,000 requests arrive over hours 0 to 0.2")
        assert "set traffic.arrival.start_hour: 14" in said[0]
        doc = serving_document(ServeScenario.model_validate(raw), plan=False, sweep=False)
        assert any(said[0] in p for sec in doc["sections"] for p in sec["paragraphs"])
