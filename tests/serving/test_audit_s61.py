"""Serving defects a first-time user found (audit of 2026-11-25, second pass): the capacity
line and the short-window note judged a planned peak the run never simulated, a capacity
sentence garbled by refused requests, a short-window note that claimed its p99s read low
when they read high, and a diurnal run at its peak simulated too briefly without a word.
Each test failed before its fix."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from infraplan.cli import main
from infraplan.scenario_files import load_scenario
from infraplan.serving.capacity import accepted_share, capacity_summary
from infraplan.serving.deployment import Deployment, resolve
from infraplan.serving.run import simulate_scenario, window_note
from infraplan.serving.scenario import ServeScenario
from infraplan.serving.traffic import Requests
from infraplan.serving.window import WINDOW_SOJOURNS, sojourn_window_s

ROOT = Path(__file__).resolve().parents[2]
CHAT = yaml.safe_load((ROOT / "examples" / "serve-llama8b-chat.yaml").read_text())
DIURNAL = yaml.safe_load((ROOT / "examples" / "serve-llama70b-diurnal.yaml").read_text())


def _simulate_json(tmp_path, capsys, raw: dict) -> dict:
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(raw))
    assert main(["simulate", "serve", str(path), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_planned_peak_is_not_the_load_the_run_was_judged_at(tmp_path, capsys):
    """peak_rate_per_s 40 on the 20 requests/s chat example: the run is at 20 (36% of the
    saturated 55), but the line said 'peak 40 requests/s is 73% of it' and the note called
    3,000 requests too few at 73%; without the key no note appears."""
    plain = _simulate_json(tmp_path, capsys, CHAT)
    peaked = _simulate_json(tmp_path, capsys, dict(CHAT, peak_rate_per_s=40))
    assert peaked["ttft_s"] == plain["ttft_s"]  # the same run
    cap = peaked["capacity"]
    assert cap["utilization"] == pytest.approx(40 / cap["requests_per_s"])
    assert cap["simulated_requests_per_s"] == pytest.approx(20, rel=0.03)
    assert cap["simulated_utilization"] == pytest.approx(
        cap["simulated_requests_per_s"] / cap["requests_per_s"])
    assert 0.3 < cap["simulated_utilization"] < 0.4 < 0.7 < cap["utilization"] < 0.8
    assert cap["text"] == (
        f"{cap['requests_per_s']:.3g} requests/s when saturated; the simulated stream's "
        f"arrivals come at {cap['simulated_requests_per_s']:.3g} requests/s, "
        f"{cap['simulated_utilization']:.0%} of it; the planned peak (peak_rate_per_s) of "
        f"40 requests/s would be {cap['utilization']:.0%} of it")
    assert not [n for n in peaked["notes"] if "too few" in n]
    assert not [n for n in plain["notes"] if "too few" in n]


def test_refused_requests_get_their_own_clauses():
    """'offered 0.2 requests/s, of which it takes 8.0% (0.016 requests/s; it refuses the
    rest), is 4% of it'; a diurnal run at 2 requests/s read as the curve's peak of 12."""
    replica = resolve(Deployment(model="llama-3.1-8b", gpu="h100", max_num_seqs=1,
                                 max_num_batched_tokens=100))
    requests = Requests(np.arange(64) * 0.5, np.full(64, 200), np.full(64, 20))
    one = capacity_summary(replica, requests, 1, 20.0, accepted_share=0.08)
    c = one["requests_per_s"]
    assert one["text"] == (f"{c:.3g} requests/s when saturated; offered 20 requests/s; it "
                           "takes 8.0% of them (1.6 requests/s) and refuses the rest; "
                           f"what it takes is {1.6 / c:.0%} of the saturated rate")
    # a diurnal run over hours at 2 requests/s (63 gaps of 0.5 s) against a peak of 3
    day = capacity_summary(replica, requests, 1, 3.0, "curve peak", per_replica_s=c,
                           accepted_share=0.25)
    assert day["simulated_requests_per_s"] == pytest.approx(2.0)
    assert day["text"] == (
        f"{c:.3g} requests/s when saturated; the simulated hours' arrivals come at 2 "
        "requests/s; it takes 25.0% of them (0.5 requests/s) and refuses the rest; what it "
        f"takes is {0.5 / c:.0%} of the saturated rate; at the diurnal curve's peak of 3 "
        f"requests/s it would take 0.75 requests/s, {0.75 / c:.0%} of the saturated rate")
    assert day["simulated_utilization"] == pytest.approx(0.5 / c)


def test_the_short_window_note_claims_a_direction_only_for_the_start():
    """The 70B example's 3,000 requests read p99 TTFT 292.5 ms where a steady window read
    280.0, yet the note said its p99 latencies 'read low'. A p99 of few requests errs
    either way; only the empty start's pull is derived, and the note gives its size."""
    scenario = load_scenario(ROOT / "examples" / "article-3-serve-70b-100k-users.yaml",
                             ServeScenario)
    # the example once ran 3,000 requests; it now runs enough (the note below asked for it)
    scenario = scenario.model_copy(update={"traffic": scenario.traffic.model_copy(
        update={"num_requests": 3000})})
    sim = simulate_scenario(scenario)
    result = sim["result"]
    capacity = capacity_summary(result.replica, result.requests, 3, 20.0,
                                accepted_share=accepted_share(sim["summary"]))
    [note] = window_note(scenario, result, capacity)
    assert "read low" not in note
    light = sojourn_window_s(result) / WINDOW_SOJOURNS / float(np.ptp(result.requests.arrival_s))
    assert note.startswith(
        f"3,000 requests are too few at {capacity['utilization']:.0%} of the saturated rate: "
        "a run this short starts with empty engines and ends draining them, its batches "
        f"about {light:.0%} lighter than the service's, so its p99 latencies may misstate "
        "the service's: the light start pulls them low, but a p99 of 3,000 requests rests on "
        "its 30 slowest, which can land either side. About ")
    assert 0.05 < light < 0.2


def test_a_diurnal_run_at_its_peak_is_told_its_window_is_short(tmp_path, capsys):
    """start_hour 14 on the 70B diurnal example (2 x TP 4): 2,000 requests at 70% read p99
    TTFT 1,009.9 ms where 6,000 read 822 ms, and nothing said the window was short. The
    hours it covers hold the rate within 10%, so it is judged as a stationary stream at its
    own rate; the example's night hours (12% load) are not too short."""
    raw = dict(DIURNAL, deployment=dict(DIURNAL["deployment"], tp=4),
               traffic=dict(DIURNAL["traffic"],
                            arrival=dict(DIURNAL["traffic"]["arrival"], start_hour=14)))
    data = _simulate_json(tmp_path, capsys, raw)
    [note] = [n for n in data["notes"] if "too few" in n]
    assert note.startswith(
        f"2,000 requests are too few at {data['capacity']['simulated_utilization']:.0%} of "
        "the saturated rate: ")
    assert "set traffic.num_requests to about " in note
    night = dict(raw, traffic=dict(DIURNAL["traffic"]))
    assert not [n for n in _simulate_json(tmp_path, capsys, night)["notes"] if "too few" in n]
    # a run across the curve's changes has no one load: no window judgement
    scenario = ServeScenario.model_validate(raw)
    requests = Requests(np.array([0.0, 6 * 3600.0]), np.full(2, 100), np.full(2, 10))
    result = type("R", (), {"requests": requests})()
    assert window_note(scenario, result, {"simulated_utilization": 0.9}) == []
