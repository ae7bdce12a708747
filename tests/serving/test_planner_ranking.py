"""How plan serve orders what it keeps: cost, then latency, then GPUs; the leaders confirmed."""

from __future__ import annotations

import infraplan.serving.provision as provision
from infraplan.serving.deployment import Deployment
from infraplan.serving.planner import Candidate, plan_serving
from infraplan.serving.provision import CONFIRMED
from infraplan.serving.scenario import ServeScenario

TRAFFIC = {"arrival": {"kind": "poisson", "rate_per_s": 10}, "num_requests": 400,
           "input": {"kind": "lognormal", "mean": 1000, "sigma": 0.8, "max": 8000},
           "output": {"kind": "lognormal", "mean": 200, "sigma": 0.8, "max": 2000}}


def test_equal_cost_ranks_the_faster_format_first():
    """bf16 and fp8 on the same two H100s cost the same; fp8 reads half the weight bytes a
    decode step, so its latency is lower and it ranks first (the grid order put bf16
    first)."""
    scenario = ServeScenario.model_validate({
        "model": "llama-3.1-8b", "traffic": TRAFFIC,
        "slo": {"ttft_p99_s": 2.0, "tpot_p99_s": 0.1},
        "search": {"gpus": ["h100"], "tp": [2], "weight_dtypes": ["bf16", "fp8"],
                   "max_replicas": 4}})
    plan = plan_serving(scenario)
    first, second = plan.ranked
    assert first.usd_per_hour == second.usd_per_hour
    assert (first.deployment.weight_dtype, second.deployment.weight_dtype) == ("fp8", "bf16")
    assert first.summary["e2e_s"]["p99"] < second.summary["e2e_s"]["p99"]


def _candidate(gpus: int, usd_per_hour: float, e2e_p99_s: float) -> Candidate:
    dep = Deployment(model="llama-3.1-8b", gpu="h100", tp=1, replicas=gpus)
    return Candidate(dep, usd_per_hour=usd_per_hour,
                     summary={"e2e_s": {"p99": e2e_p99_s}})


def test_at_one_instances_price_the_faster_layout_ranks_first():
    """3 x TP 2 and 2 x TP 4 both rent one 8-GPU instance at $23.60/h (the first spreads
    the bill over the 6 GPUs it uses). The 8-GPU layout serves faster for the same bill: it
    ranks first (it came second, on fewer GPUs, and the audit saw a 'cheapest' that was
    only slower); a bill apart by a float's last bits is the same bill."""
    six = _candidate(6, 23.6 - 1e-12, 0.40)
    eight = _candidate(8, 8 * 2.95, 0.30)
    assert sorted([six, eight], key=provision.rank_key) == [eight, six]
    cheaper = _candidate(6, 23.59, 0.40)
    assert sorted([eight, cheaper], key=provision.rank_key) == [cheaper, eight]


def test_a_leader_that_grows_on_confirmation_lets_the_next_be_confirmed(monkeypatch):
    """Confirming the cheapest as a whole deployment added replicas until it cost more than
    the fourth; the fourth then leads unconfirmed. The leaders are confirmed until the
    first CONFIRMED of the final order all were, and the order is by cost throughout."""
    confirmed = []

    def fake_confirm(scenario, cand, rate, slo, base_dir):
        confirmed.append(cand)
        if cand.usd_per_hour == 1.0:  # the router needs three more replicas
            cand.deployment = cand.deployment.model_copy(update={"replicas": 4})
            cand.usd_per_hour = 4.0
        return 1

    monkeypatch.setattr(provision, "confirm_deployment", fake_confirm)
    cands = [_candidate(n, float(n), 1.0) for n in (1, 2, 3, 3)]
    faster = cands[3]
    faster.summary = {"e2e_s": {"p99": 0.5}}  # the faster of the two at $3/h
    ranked, sims = provision.confirm_cheapest(None, cands, 10.0, None, None)
    assert [c.usd_per_hour for c in ranked] == [2.0, 3.0, 3.0, 4.0]
    assert ranked[1] is faster  # equal cost: the lower p99 end-to-end first
    assert sims == len(confirmed) == CONFIRMED + 1
    assert all(c in confirmed for c in ranked[:CONFIRMED])


def test_every_kept_configuration_runs_below_its_capacity_and_says_how_far(tmp_path, capsys):
    """Load = planning rate / (replicas x one replica's saturated rate): below 1 for every
    configuration kept (fewer replicas could not keep up at all), shown per row."""
    import json

    import yaml

    from infraplan.cli import main

    raw = {"model": "llama-3.1-8b", "traffic": TRAFFIC, "slo": {"ttft_p99_s": 1.0},
           "search": {"gpus": ["h100", "l40s"], "tp": [1], "weight_dtypes": ["fp8"],
                      "max_replicas": 8}}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(raw))
    assert main(["plan", "serve", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    kept = out["alternatives"]
    assert len(kept) == 2
    for c in kept:
        expected = 10 / (c["deployment"]["replicas"] * c["capacity_requests_per_s_per_replica"])
        assert c["load_share"] == expected and 0 < expected < 1
    assert out["best"]["load_share"] == kept[0]["load_share"]
    assert main(["plan", "serve", str(path)]) == 0
    text = capsys.readouterr().out
    header = next(line for line in text.splitlines() if line.startswith("configuration"))
    assert header.split()[-5:] == ["TPOT", "load", "$/M", "out", "tok"]
    assert f"{kept[0]['load_share']:.0%}" in text.split(header)[1].splitlines()[2]


def test_the_leaders_keep_the_fewest_replicas_their_whole_deployment_needs():
    """Replica counts come from one replica's share of a random split; the least
    outstanding router pools the queues, so the whole deployment can meet the SLOs with
    fewer. Confirming took replicas away never, and plan serve kept 5 x 2 H100 where
    simulate serve passed a cheaper deployment. Each confirmed leader now has the fewest
    replicas at which its whole deployment, simulated as simulate serve would, meets the
    SLOs (down to the count that keeps each replica below its capacity), on the window
    that reaches its steady state and with the SLOs' confidence bounds (provision.judged)."""
    from infraplan.serving.provision import violations
    from infraplan.serving.window import fewest_settling

    traffic = dict(TRAFFIC, arrival={"kind": "poisson", "rate_per_s": 30},
                   num_requests=1500)
    scenario = ServeScenario.model_validate({
        "model": "llama-3.1-8b", "traffic": traffic,
        "slo": {"ttft_p99_s": 1.0, "tpot_p99_s": 0.03},
        "search": {"gpus": ["h100", "a100"], "tp": [1], "weight_dtypes": ["bf16"],
                   "max_replicas": 16}})
    plan = plan_serving(scenario)
    slo = scenario.slo.to_slo()

    def meets(cand, replicas):
        dep = cand.deployment.model_copy(update={"replicas": replicas})
        summary, _ = provision.judged(scenario, dep, cand.resolved, plan.rate_per_s,
                                      cand.capacity_requests_per_s, None, 1.0)
        return not violations(summary, slo)

    shrunk = 0
    for cand in plan.ranked[:CONFIRMED]:
        replicas = cand.deployment.replicas
        floor = fewest_settling(plan.rate_per_s, cand.capacity_requests_per_s)
        assert meets(cand, replicas)
        assert replicas == floor or not meets(cand, replicas - 1)
        per_replica_count = provision.fewest_replicas(
            scenario, cand.resolved, plan.rate_per_s, slo, 16,
            cand.usd_per_hour / cand.deployment.num_gpus, None,
            cand.capacity_requests_per_s)[0]
        shrunk += replicas < per_replica_count
    assert shrunk == 2  # the router's pooling saves replicas on both


def test_alternatives_not_simulated_whole_are_marked(capsys):
    """Only the cheapest are confirmed behind their router; the others' replica counts come
    from the per-replica search and can be high (3 x 4 x h100 listed at $32.28 where the
    scenario's 2 x 4 x h100 meets the SLOs): the table marks them and says why."""
    import json
    from pathlib import Path

    from infraplan.cli import main
    from infraplan.serving.planner import UNCONFIRMED_NOTE

    path = Path(__file__).parents[2] / "examples" / "serve-llama70b-diurnal.yaml"
    assert main(["plan", "serve", str(path), "--json"]) == 0
    ranked = json.loads(capsys.readouterr().out)["alternatives"]
    flags = [c["confirmed"] for c in ranked]
    assert len(ranked) > CONFIRMED and flags == [True] * CONFIRMED + [False] * (
        len(ranked) - CONFIRMED)
    assert main(["plan", "serve", str(path)]) == 0
    text = capsys.readouterr().out
    for c in ranked:
        line = next(x for x in text.splitlines() if x.startswith(c["describe"] + " "))
        assert line.startswith(c["describe"] + (" " if c["confirmed"] else " *")), line
    assert UNCONFIRMED_NOTE in text


def test_a_bursty_stream_is_sized_on_its_smoother_share_per_replica():
    """Each replica of a random split sees a thinned gamma stream (CV^2 = cv^2 / R + 1 -
    1 / R), not the whole stream's bursts at rate / R: sized on those, L40S needed more
    than 32 replicas and was rejected, while 12 meet the SLOs simulated whole."""
    scenario = ServeScenario.model_validate({
        "model": "llama-3.1-8b",
        "traffic": {"arrival": {"kind": "gamma", "rate_per_s": 30, "cv": 4},
                    "num_requests": 2000,
                    "input": {"kind": "lognormal", "mean": 1500, "sigma": 0.9, "max": 16000},
                    "output": {"kind": "lognormal", "mean": 300, "sigma": 0.8, "max": 4000}},
        "slo": {"ttft_p99_s": 1.0, "tpot_p99_s": 0.04},
        "search": {"gpus": ["l40s"], "tp": [1], "weight_dtypes": ["fp8"],
                   "max_replicas": 32}})
    plan = plan_serving(scenario)
    (best,) = plan.ranked
    assert best.confirmed and best.deployment.replicas <= 16
    assert not provision.violations(best.summary, scenario.slo.to_slo())


def test_a_configuration_no_replica_count_serves_is_named_without_the_cap():
    """'Rejected 16 x 1 x h100 fp8: needs 50 replicas ...' named the max_replicas cap as
    if 16 replicas had been tried; it is the replica's shape that is rejected."""
    cand = _candidate(16, float("inf"), float("inf"))
    cand.replicas_found = False
    assert cand.describe().startswith("replicas of 1 x h100 bf16/kv ")
    assert _candidate(3, 3.0, 1.0).describe().startswith("3 x 1 x h100 bf16/kv ")
