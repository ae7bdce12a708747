"""What a serving scenario is checked for when it is read and planned: names, bounds,
context lengths, overload without SLOs. Each case below was accepted silently, crashed, or
gave a misleading answer before (the audit of 2026-11-24)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import yaml

from infraplan.cli import main
from infraplan.errors import InputError
from infraplan.serving.deployment import Deployment, resolve
from infraplan.serving.metrics import summarize
from infraplan.serving.capacity import saturated_requests_per_s
from infraplan.serving.planner import plan_serving
from infraplan.serving.scenario import ServeScenario
from infraplan.serving.simulate import simulate
from infraplan.serving.traffic import Requests

TRAFFIC = {"arrival": {"kind": "poisson", "rate_per_s": 5}, "num_requests": 40,
           "input": {"kind": "fixed", "value": 200}, "output": {"kind": "fixed", "value": 20}}
PLAN = {"model": "llama-3.1-8b", "traffic": TRAFFIC,
        "search": {"gpus": ["h100"], "tp": [1], "weight_dtypes": ["fp8"], "max_replicas": 4}}
SIMULATE = {"model": "llama-3.1-8b", "traffic": TRAFFIC, "deployment": {"gpu": "h100"}}


def _with(base: dict, **changes) -> dict:
    raw = copy.deepcopy(base)
    for dotted, value in changes.items():
        node, *path, leaf = [raw, *dotted.split("__")]
        for part in path:
            node = node.setdefault(part, {})
        node[leaf] = value
    return raw


def _run(tmp_path, capsys, raw: dict, *command: str) -> tuple[int, str, str]:
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(raw))
    code = main([*command, str(path)])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


@pytest.mark.parametrize("command, raw, fragment", [
    (("plan", "serve"), _with(PLAN, search__gpus=["h1000"]),
     "search.gpus has unknown accelerator 'h1000'; did you mean 'h100-sxm5-80gb'"),
    (("plan", "serve"), _with(PLAN, search__weight_dtypes=["fp9"]),
     "search.weight_dtypes has 'fp9', not a serving weight format; did you mean 'fp8'?"),
    (("plan", "serve"), _with(PLAN, search__engine="vlm"), "unknown engine 'vlm'"),
    (("plan", "serve"), _with(PLAN, prices={"h100": 1e300}),
     "prices.h100 must be <= 1000 (got 1e+300)"),
    (("plan", "serve"), _with(PLAN, prices={"h10": 2.0}),
     "prices has unknown accelerator 'h10'"),
    # an alias and the full name: the first price won silently
    (("simulate", "serve"), _with(SIMULATE, prices={"h100": 2.0, "h100-sxm5-80gb": 3.0}),
     "prices names h100-sxm5-80gb twice: 'h100' ($2.00) and 'h100-sxm5-80gb' ($3.00) are the same "
     "accelerator; to fix: keep one of them"),
    (("plan", "serve"), _with(PLAN, prices={"h100": float("nan")}),
     "error: scenario.yaml: prices.h100 must be a finite number (got nan)"),
    (("plan", "serve"), _with(PLAN, deployment={"gpu": "h100", "replicaz": 2}),
     "deployment.replicaz is not a known key; did you mean 'replicas'?"),
    # a scenario for the other serving command names that command
    (("plan", "serve"), SIMULATE,
     "error: plan serve needs a search: section in the scenario (what to compare); this one "
     "has a deployment only. To fix: add search: {gpus: [h100, a100-sxm4-80gb]}, or run "
     "simulate serve on the deployment"),
    (("simulate", "serve"), PLAN,
     "deployment is required by simulate serve; this scenario has a search only. To fix: add "
     "deployment: {gpu: h100, tp: 1, replicas: 1}, or run plan serve on the search"),
    (("simulate", "serve"), _with(SIMULATE, deployment__model="llama-3.1-70b"),
     "deployment.model is not a key: the deployment serves the scenario's model"),
    (("simulate", "serve"), _with(SIMULATE, deployment__kv_policy="reserv"),
     "kv_policy must be one of 'on_demand', 'reserve' (got 'reserv'); did you mean 'reserve'?"),
    (("simulate", "serve"), _with(SIMULATE, deployment__batching="static"),
     "error: scenario.yaml: deployment.batch_size is required when batching is 'static'"),
    (("simulate", "serve"), _with(SIMULATE, deployment__expert_imbalance=float("inf")),
     "deployment.expert_imbalance must be a finite number"),
    # an imbalance no router can reach (1e300) ran and blamed the request lengths
    (("simulate", "serve"), _with(SIMULATE, model="mixtral-8x7b", deployment__tp=2,
                                  deployment__expert_imbalance=1e300),
     "deployment.expert_imbalance=1e+300 is more than mixtral-8x7b can reach: with 8 experts "
     "and 2 per token the busiest takes at most 4 times the mean load"),
    (("simulate", "serve"), _with(SIMULATE, deployment__expert_imbalance=2.0),
     "deployment.expert_imbalance=2 is for mixture-of-experts models; llama-3.1-8b has no "
     "routed experts"),
    # no accelerator priced: every candidate was rejected and the closing error blamed SLOs
    (("plan", "serve"), _with(PLAN, pricing="reserved-3y"),
     "pricing 'reserved-3y' prices none of search.gpus: no reserved-3y offer for "
     "h100-sxm5-80gb in the offers table (on_demand: "),
    (("simulate", "serve"), _with(SIMULATE, deployment__replicas=True),
     "replicas must be a number, not a true/false value"),
    (("simulate", "serve"), _with(SIMULATE, traffic__input={"kind": "uniform", "low": 1,
                                                           "high": 10**19}),
     "traffic.input.high must be <= 1000000000"),
    (("simulate", "serve"), _with(SIMULATE, traffic__arrival__rate_per_s=1e-306),
     "traffic.arrival: the requests would arrive over"),
    # each arrival kind's own remedy (a Poisson stream has no time_scale)
    (("simulate", "serve"), _with(SIMULATE, traffic__arrival__rate_per_s=1e-9),
     "(about 30 years). To fix: raise traffic.arrival.rate_per_s, or lower "
     "traffic.num_requests"),
    (("simulate", "serve"), _with(SIMULATE, traffic__arrival={"kind": "diurnal",
                                                             "curve": [[0, 1e-9]]}),
     "To fix: raise the rates of traffic.arrival.curve, or lower traffic.num_requests"),
    (("simulate", "serve"), _with(SIMULATE, traffic__input__value=200_000),
     "no request completed: 40 prompt + output longer than the model's 131,072-token "
     "context. To fix: keep prompt + output within the model's context"),
    # each refusal gets its own fix (it used to be "raise tp, quantize" for all three)
    (("simulate", "serve"), _with(SIMULATE, deployment__gpu="l4", traffic__input__value=120_000),
     "no request completed: 40 prompt + output longer than the KV cache holds. To fix: "
     "shorten the requests (traffic.input / traffic.output), or give the engine more KV "
     "cache"),
    # (64 sequences: vLLM refuses fewer batched tokens than sequences, checked below)
    (("simulate", "serve"), _with(SIMULATE, deployment__chunked_prefill=False,
                                  deployment__max_num_seqs=64,
                                  deployment__max_num_batched_tokens=100),
     "no request completed: 40 prompt longer than max_num_batched_tokens without chunked "
     "prefill. To fix: set deployment.chunked_prefill: true, or raise "
     "deployment.max_num_batched_tokens above the longest prompt"),
    # the deployment's names are checked when the file is read, under their own path
    (("simulate", "serve"), _with(SIMULATE, deployment__gpu="h1000"),
     "error: scenario.yaml: deployment.gpu unknown accelerator 'h1000'; did you mean "
     "'h100-sxm5-80gb'"),
    (("simulate", "serve"), _with(SIMULATE, deployment__engine="vlm"),
     "error: scenario.yaml: deployment.engine unknown engine 'vlm'; did you mean 'vllm'? To "
     "fix: run 'infraplan catalog engines' to list them\n"),
    # a block size the engine refuses at launch (a 100,000-token block ran)
    (("simulate", "serve"), _with(SIMULATE, deployment__block_size=100_000),
     "deployment.block_size 100,000 is not one vllm accepts (1, 8, 16, 32, 64, 128, 256); to "
     "fix: set block_size to 256 (or leave it out for vllm's 16)"),
    (("simulate", "serve"), _with(SIMULATE, deployment__engine="trt-llm",
                                  deployment__block_size=48),
     "deployment.block_size 48 is not one tensorrt-llm accepts (a power of two); to fix: set "
     "block_size to 32"),
    # a single value where a mapping belongs, and a key one level too high
    (("simulate", "serve"), _with(SIMULATE, traffic__arrival="poisson",
                                  traffic__rate_per_s=2),
     "traffic.arrival must be a mapping of keys (kind, rate_per_s, cv, curve, ...), not a "
     "single value (got 'poisson'); to fix: write arrival: {kind: poisson, ...}; "
     "traffic.rate_per_s is not a key here; it belongs under traffic.arrival.rate_per_s"),
])
def test_bad_serving_scenarios_name_the_field(tmp_path, capsys, command, raw, fragment):
    code, _, err = _run(tmp_path, capsys, raw, *command)
    assert code == 2 and fragment in err, err


@pytest.mark.parametrize("engine, size", [("vllm", 8), ("vllm", 128), ("tensorrt-llm", 64),
                                          ("tensorrt-llm", 1), ("sglang", 7),
                                          ("lmdeploy", 48)])
def test_block_sizes_the_engines_take_are_simulated_with(engine, size):
    dep = Deployment(model="llama-3.1-8b", gpu="h100", engine=engine, block_size=size)
    assert resolve(dep).memory.block_size == size


def test_without_an_slo_no_view_claims_requests_met_it(tmp_path, capsys):
    """A 3-minute TTFT used to read '100.0% within SLOs' when the scenario set none."""
    import json

    from infraplan.report.document_serve import serving_document

    slow = _with(SIMULATE, deployment__max_num_seqs=1, deployment__max_num_batched_tokens=100,
                 traffic__arrival__rate_per_s=50)  # about 5 requests/s served: a queue
    slow.pop("slo", None)
    code, out, _ = _run(tmp_path, capsys, slow, "simulate", "serve")
    assert code == 0 and "goodput: no SLO set (slo: ttft_p99_s, tpot_p99_s, e2e_p99_s)" in out
    assert "SLOs met" not in out
    code, out, _ = _run(tmp_path, capsys, slow, "simulate", "serve", "-q")
    assert out.rstrip().endswith(", no SLO set")
    code, out, _ = _run(tmp_path, capsys, slow, "simulate", "serve", "--json")
    assert json.loads(out)["slo"] == {}
    doc = serving_document(ServeScenario.model_validate(slow), plan=False, sweep=True,
                           sweep_requests=40)
    items = {i["label"]: i["text"] for sec in doc["sections"] for i in sec["items"]}
    assert items["requests meeting every SLO"] == items["goodput (all SLOs met)"] == \
        items["highest load meeting the SLOs"] == "no SLO set"
    # Yield claimed '125% of the planning rate or more' of headroom for this queue
    assert "headroom before the SLOs break" not in items
    # with one, it is named and counted
    timed = _with(slow, slo={"ttft_p99_s": 1.0})
    code, out, _ = _run(tmp_path, capsys, timed, "simulate", "serve", "--json")
    data = json.loads(out)
    assert data["slo"] == {"ttft_p99_s": 1.0} and data["slo_attainment"] < 0.5
    # the load test's headline says where its sweep ended: it gave the sweep's top as the
    # highest load meeting the SLOs, and 'none swept' when the lowest missed them
    # Yield's headroom said '25% of the planning rate or more' where the sweep missed the
    # SLOs from 50% on. One sequence at a time, this deployment completes about 6 requests
    # a second: a load above that misses any SLO in the long run.
    for rate, slo, headline, headroom in (
            (50, {"ttft_p99_s": 1.0}, "none swept: missed at 12.5 requests/s, the lowest",
             "none on 1 replica: missed at 25% of the planning rate, the lowest swept"),
            (8, {"ttft_p99_s": 1e4}, "4 requests/s",
             "none on 1 replica: met up to 50% of the planning rate, missed at 75%"),
            (4, {"ttft_p99_s": 1e4}, "5 requests/s or more (the highest swept)",
             "125% of the planning rate or more (the highest swept) on 1 replica")):
        raw = _with(slow, slo=slo, traffic__arrival__rate_per_s=rate)
        doc = serving_document(ServeScenario.model_validate(raw), plan=False, sweep=True,
                               sweep_requests=40)
        items = {i["label"]: i["text"] for sec in doc["sections"] for i in sec["items"]}
        assert items["highest load meeting the SLOs"] == headline
        assert items["headroom before the SLOs break"] == headroom


def test_plan_serve_without_an_slo_says_what_it_planned_for():
    plan = plan_serving(ServeScenario.model_validate(PLAN))
    assert plan.best is not None and not ServeScenario.model_validate(PLAN).slo.to_slo().given()
    assert "no SLO set: the cheapest configuration that keeps up with the traffic, at any " \
        "latency (set slo: ttft_p99_s, tpot_p99_s, e2e_p99_s)" in plan.notes
    timed = plan_serving(ServeScenario.model_validate(_with(PLAN, slo={"ttft_p99_s": 2.0})))
    assert not any("no SLO" in n for n in timed.notes)


def test_gpu_aliases_are_one_candidate():
    scenario = ServeScenario.model_validate(_with(PLAN, search__gpus=["h100", "H100-SXM5"]))
    assert scenario.search.gpus == ("h100-sxm5-80gb",)


def test_a_relative_trace_is_read_beside_the_scenario_from_any_folder(tmp_path, capsys,
                                                                    monkeypatch):
    (tmp_path / "trace.csv").write_text("arrival_s,input_len,output_len\n" + "".join(
        f"{i * 0.1:.1f},200,20\n" for i in range(100)))
    raw = _with(PLAN, traffic={"arrival": {"kind": "trace", "path": "trace.csv"}})
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "trace.csv").write_text("arrival_s,input_len,output_len\n0,10,10\n1000,10,10\n")
    outputs = []
    for folder in (tmp_path, elsewhere):
        monkeypatch.chdir(folder)
        code, out, err = _run(tmp_path, capsys, raw, "plan", "serve", "--json")
        assert code == 0, err
        data = yaml.safe_load(out)
        outputs.append((data["planning_rate_per_s"], data["best"]["output_tokens_per_s"],
                        data["simulations"]))
    assert outputs[0] == outputs[1]
    assert outputs[0][0] == pytest.approx(100 / 9.9)


def test_a_trace_arriving_at_one_instant_asks_for_a_rate(tmp_path, capsys):
    (tmp_path / "trace.csv").write_text("arrival_s,input_len,output_len\n0,200,20\n0,200,20\n")
    raw = _with(PLAN, traffic={"arrival": {"kind": "trace", "path": "trace.csv"}})
    code, _, err = _run(tmp_path, capsys, raw, "plan", "serve")
    assert code == 2 and "arrives at the same instant" in err and "peak_rate_per_s" in err


@pytest.mark.parametrize("arrival, peak, rate", [
    ({"kind": "poisson", "rate_per_s": 5}, 4, "rate, 5 requests/s"),
    ({"kind": "diurnal", "curve": [[0, 2], [12, 10]]}, 5, "mean over the day, 6 requests/s"),
    ({"kind": "trace", "path": "trace.csv"}, 5, "rate, 10.26 requests/s")])
def test_a_peak_below_the_traffic_rate_is_refused(tmp_path, capsys, arrival, peak, rate):
    """plan serve sized 2 x L40S for a peak of 10 requests/s under Poisson traffic of 20:
    simulated on the scenario's traffic, p99 TTFT 31.8 s and 2 % goodput."""
    (tmp_path / "trace.csv").write_text("arrival_s,input_len,output_len\n" + "".join(
        f"{i * 0.1:.1f},200,20\n" for i in range(100)))
    raw = _with(PLAN, traffic=dict(TRAFFIC, arrival=arrival), peak_rate_per_s=peak)
    code, _, err = _run(tmp_path, capsys, raw, "plan", "serve")
    assert code == 2 and err.count("\n") == 1
    assert f"peak_rate_per_s {peak} requests/s is below the traffic's {rate}" in err
    assert "fix: set peak_rate_per_s to at least" in err.lower()
    code, _, err = _run(tmp_path, capsys, dict(raw, peak_rate_per_s=10.5), "plan", "serve")
    assert code == 0, err


def test_a_trace_naming_a_column_twice_is_refused(tmp_path, capsys):
    (tmp_path / "trace.csv").write_text("arrival_s,input_len,input_len,output_len\n0,1,2,3\n")
    raw = _with(SIMULATE, traffic={"arrival": {"kind": "trace", "path": "trace.csv"}})
    code, _, err = _run(tmp_path, capsys, raw, "simulate", "serve")
    assert code == 2 and "the header names input_len twice" in err


def test_an_impossible_slo_exits_2_after_saying_why_each_configuration_lost(tmp_path, capsys):
    code, out, err = _run(tmp_path, capsys, _with(PLAN, slo={"ttft_p99_s": 1e-6}),
                          "plan", "serve")
    assert code == 2 and "no configuration meets the SLOs at 5 requests/s" in err
    assert "rejected:" in out and "p99 TTFT" in out


def test_vllm_refuses_requests_longer_than_the_context_and_tensorrt_llm_does_not():
    arch_ctx = 131_072
    requests = Requests(np.zeros(3), [1000, arch_ctx - 10, arch_ctx - 5], [10, 10, 10])
    for engine, dropped in (("vllm", {2}), ("tensorrt-llm", set())):
        result = simulate(Deployment(model="llama-3.1-8b", gpu="h100", engine=engine,
                                     weight_dtype="fp8"), requests)
        assert set(result.dropped) == dropped, engine
        reasons = summarize(result)["dropped_by_reason"]
        if dropped:
            assert reasons == {"prompt + output longer than the model's 131,072-token "
                               "context": 1}


def test_the_saturated_rate_separates_stable_from_overloaded_queues():
    """Below the estimated capacity a long Poisson run keeps up with its arrivals; above it
    the completions fall behind."""
    dep = Deployment(model="llama-3.1-8b", gpu="l4", weight_dtype="fp8")
    resolved = resolve(dep)
    n = 2000
    lengths = np.full(n, 800), np.full(n, 150)
    capacity = saturated_requests_per_s(resolved, Requests(np.zeros(n), *lengths))
    for load, keeps_up in ((0.8, True), (1.25, False)):
        rate = load * capacity
        arrivals = np.cumsum(np.random.default_rng(0).exponential(1 / rate, n))
        served = summarize(simulate(dep, Requests(arrivals, *lengths), resolved=resolved))
        achieved = served["throughput"]["requests_per_s"]
        assert (achieved >= 0.95 * rate) == keeps_up, (load, achieved, rate)
        assert (served["ttft_s"]["p99"] < 5.0) == keeps_up


def test_without_slos_the_plan_still_keeps_up_with_the_traffic():
    """Before, the cheapest single L40S was chosen for 5x the load it can serve."""
    raw = {"model": "llama-3.1-8b",
           "traffic": {"arrival": {"kind": "poisson", "rate_per_s": 20}, "num_requests": 200,
                       "input": {"kind": "fixed", "value": 1000},
                       "output": {"kind": "fixed", "value": 250}},
           "search": {"gpus": ["l40s"], "tp": [1], "weight_dtypes": ["bf16"]}}
    plan = plan_serving(ServeScenario.model_validate(raw))
    best = plan.best
    assert best.deployment.replicas * best.capacity_requests_per_s > 20
    assert (best.deployment.replicas - 1) * best.capacity_requests_per_s <= 20
    with pytest.raises(InputError):  # the checks run whatever builds the scenario
        ServeScenario.model_validate(_with(raw, search__gpus=["l50"]))
