"""Serving metrics: the rates a price per token is taken over."""

from __future__ import annotations

import numpy as np
import pytest

from infraplan.serving.capacity import saturated_requests_per_s
from infraplan.serving.deployment import Deployment, resolve
from infraplan.errors import InputError
from infraplan.serving.metrics import Slo, summarize
from infraplan.serving.simulate import simulate
from infraplan.serving.traffic import Requests

DEP = Deployment(model="llama-3.1-8b", gpu="h100", engine="vllm")
PRICE = 2.0  # USD per GPU-hour


def _poisson(rate, n=1000, seed=0, offline=False):
    rng = np.random.default_rng(seed)
    arrival_s = np.zeros(n) if offline else np.cumsum(rng.exponential(1 / rate, n))
    return Requests(arrival_s, rng.integers(100, 2000, n), rng.integers(1, 4000, n))


def _cost_rate(summary):
    """Output tokens per second the cost per million output tokens was taken at."""
    return 1 / 3600 * PRICE * summary["num_gpus"] / summary["cost"][
        "usd_per_million_output_tokens"] * 1e6


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_service_that_keeps_up_is_priced_at_the_offered_token_rate(seed):
    """The price per token was taken over the makespan, whose drain of long outputs after
    the last arrival (about a minute here) no continuous service has: 7-9% too dear."""
    requests = _poisson(2.0, seed=seed)
    s = summarize(simulate(DEP, requests), usd_per_gpu_hour=PRICE)
    offered = requests.output_tokens.sum() / np.ptp(requests.arrival_s)
    assert s["completed"] == len(requests)
    assert s["steady"]["output_tokens_per_s"] == pytest.approx(offered, rel=0.02)
    assert _cost_rate(s) == pytest.approx(s["steady"]["output_tokens_per_s"], rel=1e-12)
    assert s["throughput"]["output_tokens_per_s"] < 0.95 * offered  # the drain's share


def test_an_overloaded_service_is_priced_at_what_it_completes():
    """Traffic at four times capacity: the queue outgrows the arrivals, most tokens are
    served after the last one, and the run is priced over its makespan, at about the
    engines' saturated rate rather than the offered one."""
    lengths = _poisson(1.0)
    capacity_per_s = saturated_requests_per_s(resolve(DEP), lengths)
    requests = _poisson(4 * capacity_per_s)
    s = summarize(simulate(DEP, requests), usd_per_gpu_hour=PRICE)
    assert "steady" not in s
    assert _cost_rate(s) == pytest.approx(s["throughput"]["output_tokens_per_s"], rel=1e-12)
    assert _cost_rate(s) == pytest.approx(
        capacity_per_s * requests.output_tokens.mean(), rel=0.15)


def test_a_burst_of_arrivals_is_priced_over_its_makespan():
    """Requests arriving within a millisecond: the window between the first and the last
    serves no token, and a rate over it would price the run at infinity."""
    requests = _poisson(1e6, n=200)
    s = summarize(simulate(DEP, requests), usd_per_gpu_hour=PRICE)
    assert np.ptp(requests.arrival_s) < 1e-3 and "steady" not in s
    assert _cost_rate(s) == pytest.approx(s["throughput"]["output_tokens_per_s"], rel=1e-12)


def test_an_offline_run_is_priced_over_its_makespan():
    requests = _poisson(1.0, n=200, offline=True)
    s = summarize(simulate(DEP, requests), usd_per_gpu_hour=PRICE)
    assert "steady" not in s
    assert _cost_rate(s) == pytest.approx(s["throughput"]["output_tokens_per_s"], rel=1e-12)
    assert s["cost"]["usd"] == pytest.approx(PRICE * s["makespan_s"] / 3600, rel=1e-12)


def test_simulate_serve_without_a_price_still_simulates(tmp_path, capsys):
    """No offer sells the chip at the scenario's pricing: the latency and throughput do not
    depend on a price, so the run is reported without a cost and a note says how to give
    one (it exited 2 with that message before, while `report` of the same file ran)."""
    import json

    import yaml

    from infraplan.cli import main

    scenario = {"model": "llama-3.1-8b", "pricing": "spot",
                "traffic": {"arrival": {"kind": "poisson", "rate_per_s": 5},
                            "num_requests": 200, "input": {"kind": "fixed", "value": 500},
                            "output": {"kind": "fixed", "value": 100}},
                "deployment": {"gpu": "h800"}}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(scenario))
    assert main(["simulate", "serve", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["completed"] == 200 and "cost" not in out
    assert any(n.startswith("no cost: no spot offer for h800-sxm5-80gb") and
               "prices: {h800-sxm5-80gb: 2.50}" in n for n in out["notes"])
    scenario["prices"] = {"h800": 2.0}
    path.write_text(yaml.safe_dump(scenario))
    assert main(["simulate", "serve", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["cost"]["usd_per_gpu_hour"] == 2.0
    assert not any(n.startswith("no cost") for n in out["notes"])


@pytest.mark.parametrize("call, message", [
    (lambda res: summarize(res, usd_per_gpu_hour=-2.0),
     "usd_per_gpu_hour must be a finite number of USD > 0, got -2.0"),
    (lambda res: summarize(res, usd_per_gpu_hour=float("nan")),
     "usd_per_gpu_hour must be a finite number of USD > 0, got nan"),
    (lambda res: Slo(ttft_p99_s=-1), "slo.ttft_p99_s must be a finite number of seconds > 0, "
                                      "got -1"),
    (lambda res: Slo(tpot_p99_s=0.0), "slo.tpot_p99_s must be a finite number of seconds > 0"),
    (lambda res: simulate({"gpu": "h100"}, res.requests),
     "simulate takes a Deployment, got dict. To fix: build one: Deployment(model=..., "
     "gpu=...), or a ServeScenario's with scenario.deployment_spec()"),
    (lambda res: simulate(DEP, [1, 2]), "simulate takes Requests, got list"),
])
def test_the_python_calls_check_what_the_yaml_checks(call, message):
    """From Python, a negative price gave a negative cost per token, a negative SLO an
    attainment of 0, and a scenario's deployment dict an AttributeError."""
    res = simulate(DEP, _poisson(5, n=50))
    with pytest.raises(InputError) as info:
        call(res)
    assert str(info.value).startswith(message)


def test_a_serving_scenario_simulates_in_one_call_as_the_cli_does(capsys):
    import json
    from pathlib import Path

    import infraplan as ip
    from infraplan.cli import main

    path = Path(__file__).parents[2] / "examples" / "serve-llama8b-chat.yaml"
    run = ip.simulate_scenario(ip.load_scenario(str(path), ip.ServeScenario))
    assert main(["simulate", "serve", str(path), "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    for key in ("ttft_s", "tpot_s", "e2e_s", "throughput", "cost", "completed"):
        assert run["summary"][key] == cli[key], key
