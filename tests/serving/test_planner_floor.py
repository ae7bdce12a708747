"""The capacity planner's latency floor: the stream's requests alone on an idle replica."""

from __future__ import annotations

import json

import numpy as np
import pytest

from infraplan.cli import main
from infraplan.serving.capacity import idle_latency
from infraplan.serving.deployment import Deployment, resolve
from infraplan.serving.planner import plan_serving
from infraplan.serving.metrics import Slo
from infraplan.serving.provision import per_replica_summary, violations
from infraplan.serving.scenario import ServeScenario
from infraplan.serving.simulate import simulate
from infraplan.serving.traffic import Requests, generate
from infraplan.serving.window import stationary_stream

TRAFFIC = {"arrival": {"kind": "poisson", "rate_per_s": 20}, "num_requests": 300,
           "input": {"kind": "lognormal", "mean": 1500, "sigma": 0.8, "max": 8000},
           "output": {"kind": "lognormal", "mean": 200, "sigma": 0.8, "max": 2000}}
SEARCH = {"gpus": ["h100"], "tp": [1], "weight_dtypes": ["fp8"], "max_replicas": 2}


def _raw(slo, traffic=TRAFFIC, search=SEARCH) -> dict:
    return {"model": "llama-3.1-8b", "traffic": traffic, "slo": slo, "search": search}


def _scenario(slo, traffic=TRAFFIC, search=SEARCH) -> ServeScenario:
    return ServeScenario.model_validate(_raw(slo, traffic, search))


def _plan_serve_exit(tmp_path, capsys, raw) -> tuple[int, str]:
    path = tmp_path / "s.yaml"
    path.write_text(json.dumps(raw))  # JSON is YAML
    code = main(["plan", "serve", str(path)])
    return code, capsys.readouterr().err


def test_requests_alone_take_what_one_request_takes_alone():
    """Fixed lengths: every request of the floor run sees exactly the latency of a single
    request simulated by itself (the arrivals are spaced so that none overlaps)."""
    resolved = resolve(Deployment(model="llama-3.1-8b", gpu="h100", weight_dtype="fp8"))
    fixed = {**TRAFFIC, "input": {"kind": "fixed", "value": 3000},
             "output": {"kind": "fixed", "value": 400}}
    stream = generate(stationary_stream(_scenario({}, fixed).traffic, 20), seed=0)
    floor = idle_latency(resolved, stream)
    one = simulate(resolved.deployment, Requests([0.0], [3000], [400]), resolved=resolved)
    ttft_s = float(one.first_token_s[0])  # it arrives at t = 0
    assert floor["completed"] == 300
    assert floor["ttft_s"]["p50"] == pytest.approx(ttft_s, rel=1e-9)
    assert floor["ttft_s"]["p99"] == pytest.approx(ttft_s, rel=1e-9)
    assert floor["e2e_s"]["p99"] == pytest.approx(floor["e2e_s"]["p50"], rel=1e-9)


def test_requests_alone_never_queue_when_the_longest_pair_does_not_fit():
    """The gap between the floor run's arrivals came from the longest prompt with the
    longest output; where that pair does not fit the cache it was dropped, the gap fell to
    1 s and the requests queued (Llama 3.1 70B bf16 on two H100s: a p99 TTFT of 330 s
    'alone'). Each request of the floor run now finishes before the next arrives, and the
    one request too long for the cache is the only miss."""
    resolved = resolve(Deployment(model="llama-3.1-70b", gpu="h100", tp=2))
    room = resolved.memory.kv_tokens
    inputs = [room // 2, room - 100, 300, 2000]
    outputs = [room // 2 + 10, 50, 80, 200]  # the longest input + longest output > room
    stream = Requests([0.0, 1.0, 2.0, 3.0], inputs, outputs)
    floor = idle_latency(resolved, stream)
    assert (floor["completed"], floor["dropped"]) == (3, 1)
    alone = [simulate(resolved.deployment, Requests([0.0], [i], [o]), resolved=resolved)
             for i, o in zip(inputs[1:], outputs[1:])]
    ttft = sorted(float(r.first_token_s[0]) for r in alone)
    assert floor["ttft_s"]["p50"] == pytest.approx(ttft[1], rel=1e-9)
    assert floor["ttft_s"]["p99"] <= ttft[2] * (1 + 1e-9)
    assert violations(floor, Slo()) == ["1 request dropped (prompt + output longer than the "
                                        "KV cache holds)"]


def test_the_idle_check_runs_the_stream_once_when_the_longest_pair_does_not_fit(
        monkeypatch):
    """Where the longest prompt with the longest output did not fit the cache, the gap fell
    to 1 s and the queued stream ran again and again, 4x wider each time (17 of 83 idle
    checks of a 288-configuration search: 60 s of its 200 s). Probes of the stream's own
    long requests now set the gap: one run of the stream, each request alone."""
    import infraplan.serving.capacity as capacity

    resolved = resolve(Deployment(model="llama-3.1-70b", gpu="h100", tp=2))
    room = resolved.memory.kv_tokens
    rng = np.random.default_rng(0)
    inputs = np.concatenate([[room - 100], rng.integers(500, room // 2, 199)])
    outputs = np.concatenate([[50], rng.integers(200, room // 2, 199)])
    assert inputs.max() + outputs.max() > room
    runs = []

    def counted(dep, requests, **kw):
        runs.append(requests.arrival_s.size)
        return simulate(dep, requests, **kw)

    monkeypatch.setattr(capacity, "simulate", counted)
    floor = idle_latency(resolved, Requests(np.arange(200.0), inputs, outputs))
    assert [size for size in runs if size == 200] == [200]  # the stream ran once
    assert floor["completed"] == 200 and floor["dropped"] == 0


@pytest.mark.parametrize("rate_per_s", [5, 20, 40])
def test_load_never_beats_the_idle_floor(rate_per_s):
    scenario = _scenario({})
    resolved = resolve(Deployment(model="llama-3.1-8b", gpu="h100", weight_dtype="fp8"))
    stream = generate(stationary_stream(scenario.traffic, rate_per_s), seed=0)
    floor = idle_latency(resolved, stream)
    loaded = per_replica_summary(scenario, resolved, rate_per_s, 1, 2.0, None)
    for key in ("ttft_s", "tpot_s", "e2e_s"):  # the same requests, loaded or alone
        for stat in ("p50", "p90", "p99"):
            assert floor[key][stat] <= loaded[key][stat]


def test_an_slo_below_the_idle_floor_is_called_out_of_reach(tmp_path, capsys):
    plan = plan_serving(_scenario({"tpot_p99_s": 0.001}))
    assert plan.best is None
    (cand,) = plan.rejected
    assert [m.split(" ")[1] for m in cand.idle_misses] == ["TPOT"]
    assert ("; out of reach at any replica count (300 of its requests, each alone on an "
            "idle replica: p99 TPOT") in cand.reason
    code, err = _plan_serve_exit(tmp_path, capsys, _raw({"tpot_p99_s": 0.001}))
    assert code == 2 and "so more replicas cannot help" in err
    assert "raise search.max_replicas" not in err


def test_an_slo_reachable_alone_still_asks_for_more_replicas(tmp_path, capsys):
    """At 200 requests/s two replicas cannot keep up, but a request alone meets the SLO:
    the fix is more replicas, and no floor is reported."""
    busy = {**TRAFFIC, "arrival": {"kind": "poisson", "rate_per_s": 200}}
    raw = _raw({"ttft_p99_s": 1.0, "tpot_p99_s": 0.05}, busy)
    (cand,) = plan_serving(ServeScenario.model_validate(raw)).rejected
    assert "keep up with 200 requests/s" in cand.reason and cand.idle_misses == []
    code, err = _plan_serve_exit(tmp_path, capsys, raw)
    assert code == 2 and "raise search.max_replicas" in err


def test_a_tpot_slo_on_one_token_outputs_is_met_not_nan():
    """One-token outputs have no TPOT (NaN): simulate serve counted every SLO met, while
    plan serve rejected every configuration as 'p99 TPOT nan s > 0.05 s'."""
    traffic = dict(TRAFFIC, output={"kind": "fixed", "value": 1})
    plan = plan_serving(_scenario({"ttft_p99_s": 1.0, "tpot_p99_s": 0.05}, traffic))
    assert plan.best is not None and plan.best.deployment.replicas == 1


def test_a_miss_prints_the_digits_that_tell_it_from_the_limit():
    summary = {"ttft_s": {"p99": 0.4}, "tpot_s": {"p99": 0.010002}, "e2e_s": {"p99": 12.5},
               "dropped": 0}
    assert violations(summary, Slo(ttft_p99_s=0.5, tpot_p99_s=0.01, e2e_p99_s=10)) == [
        "p99 TPOT 10.002 ms > 10 ms", "p99 end-to-end 12.5 s > 10 s"]
