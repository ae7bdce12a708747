"""The JSON API: the library's numbers, caps that answer 4xx with the reason, no file access
through names, and no 5xx on any input (hypothesis over the request schemas)."""

from __future__ import annotations

import json

import pytest

from infraplan.catalog import MODELS_DIR, load_catalog

TRAIN_BODY = {"model": "llama-3.1-8b", "gpus": ["h100", "a100-sxm4-80gb"], "min_count": 8,
              "max_count": 32, "tokens": 1e11, "global_batch": 128, "seq_len": 4096,
              "storage": "fsx-lustre-p2-125"}
TRAFFIC = {"arrival": "poisson", "rate_per_s": 8, "num_requests": 400,
           "input_mean_tokens": 800, "input_sigma": 0.8, "output_mean_tokens": 200,
           "output_sigma": 0.8}
SIM_BODY = {"model": "llama-3.1-8b", "gpu": "h100", "tp": 1, "replicas": 1,
            "weight_dtype": "fp8", "traffic": TRAFFIC, "slo": {"ttft_p99_s": 1.0}}
PLAN_SERVE_BODY = {"model": "llama-3.1-8b", "gpus": ["h100", "l40s"], "tp": [1],
                   "weight_dtypes": ["fp8"], "traffic": TRAFFIC,
                   "slo": {"ttft_p99_s": 1.0, "tpot_p99_s": 0.05}, "max_replicas": 8}


def _serve_scenario(body: dict, extra: dict):
    """The scenario a YAML file with the same content would give the CLI."""
    from infraplan.serving.scenario import ServeScenario
    from infraplan.web.api import TrafficIn

    return ServeScenario.model_validate({
        "model": body["model"], "traffic": TrafficIn(**body["traffic"]).spec(),
        "slo": body["slo"], **extra})


def test_catalog(client):
    from infraplan.report.catalog import LISTINGS

    for kind in ("models", "gpus", "storage", "engines"):
        r = client.get(f"/api/catalog/{kind}")
        assert r.status_code == 200
        assert [row["name"] for row in r.json()] == [row["name"] for row in
                                                     LISTINGS[kind]()[2]]
    assert client.get("/api/catalog/secrets").status_code == 422


def test_catalog_offers_of_one_gpu_as_the_cli_lists_them(client):
    """The CLI's `catalog offers --gpu` had no web equivalent: the page got every offer."""
    from infraplan.report.catalog import offers

    r = client.get("/api/catalog/offers", params={"gpu": "H100-SXM"})  # an alias
    assert r.status_code == 200 and r.json() == json.loads(json.dumps(
        offers("h100-sxm5-80gb")[2], default=str))
    assert {row["accelerator"] for row in r.json()} == {"h100-sxm5-80gb"}
    per_gpu = [row["on_demand_usd_per_hour"] / row["count"] for row in r.json()
               if row["on_demand_usd_per_hour"] is not None]
    assert len(per_gpu) > 2 and per_gpu == sorted(per_gpu)  # cheapest first
    r = client.get("/api/catalog/prices", params={"gpu": "h1000"})
    assert r.status_code == 422 and r.json()["detail"].startswith(
        "unknown accelerator 'h1000'; did you mean 'h100-sxm5-80gb'")
    assert r.json()["detail"].endswith("To fix: pick one from /api/catalog/gpus")
    r = client.get("/api/catalog/models", params={"gpu": "h100"})
    assert r.status_code == 422 and r.json()["detail"].endswith(
        "To fix: drop gpu, or ask /api/catalog/offers?gpu=h100")


def test_plan_train_is_plan_training(client):
    from infraplan.training.plan_train import plan_training
    from infraplan.workloads import TrainScenario

    r = client.post("/api/plan/train", json=TRAIN_BODY)
    assert r.status_code == 200, r.text
    got = r.json()
    scenario = TrainScenario.model_validate({
        "model": "llama-3.1-8b", "training": {"tokens": 1e11, "global_batch": 128,
                                               "seq_len": 4096,
                                               "storage": "fsx-lustre-p2-125"},
        "hardware": {"gpus": ["h100-sxm5-80gb", "a100-sxm4-80gb"], "min_count": 8,
                     "max_count": 32}})
    want = json.loads(json.dumps(plan_training(scenario).to_json()))
    for key in ("best", "frontier", "by_accelerator", "rejected", "configs_evaluated",
                "fitting"):
        assert got["result"][key] == want[key], key
    best = want["best"][0]
    assert f"{best['step_s']:,.3f} s" in got["html"]
    assert got["document"]["figures"]["step_breakdown"]["data"]


def test_simulate_serve_is_the_cli_call(client):
    from infraplan.serving.run import simulate_scenario

    r = client.post("/api/simulate/serve", json=SIM_BODY)
    assert r.status_code == 200, r.text
    got = r.json()["result"]
    scenario = _serve_scenario(SIM_BODY, {"deployment": {
        "gpu": "h100-sxm5-80gb", "tp": 1, "replicas": 1, "weight_dtype": "fp8",
        "engine": "vllm"}})
    want = simulate_scenario(scenario)["summary"]
    for key in ("ttft_s", "tpot_s", "e2e_s", "throughput", "cost", "kv_cache"):
        assert got[key] == pytest.approx(want[key]), key
    assert got["completed"] == want["completed"] == 400
    # the planning rate's shares, then shares of the capacity far above it
    from infraplan.report.document_serve import sweep_fractions

    sweep = r.json()["document"]["load_sweep"]
    fractions = sweep_fractions(sweep[0]["rate_per_s"] / 0.25, got["capacity"]["requests_per_s"])
    assert [p["fraction"] for p in sweep] == pytest.approx(list(fractions)) and len(sweep) > 5
    # every key --json prints but the per-event timeline (the web lacked capacity, notes
    # and seed)
    assert set(got) == set(want) | {"capacity", "seed", "deployment", "notes", "simulated"}
    assert got["capacity"]["requests_per_s"] > got["throughput"]["requests_per_s"] > 0
    assert got["seed"] == SIM_BODY.get("seed", 0) and isinstance(got["notes"], list)


def test_plan_serve_is_plan_serving(client):
    from infraplan.serving.planner import plan_serving

    r = client.post("/api/plan/serve", json=PLAN_SERVE_BODY)
    assert r.status_code == 200, r.text
    got = r.json()["result"]
    scenario = _serve_scenario(PLAN_SERVE_BODY, {"search": {
        "gpus": [load_catalog().accelerators.get(g).name for g in PLAN_SERVE_BODY["gpus"]],
        "tp": [1], "weight_dtypes": ["fp8"],
        "kv_dtypes": ["bf16"], "engine": "vllm", "max_replicas": 8}})
    want = json.loads(json.dumps(plan_serving(scenario).to_json()))
    for key in ("planning_rate_per_s", "best", "alternatives", "rejected", "simulations"):
        assert got[key] == want[key], key  # deterministic: the same numbers exactly


def test_inspect_uploaded_config_is_the_model_command(client):
    from infraplan.report.model import model_summary

    entry = load_catalog().models.get("mixtral-8x7b")
    config = json.loads((MODELS_DIR / entry.config_file).read_text())
    r = client.post("/api/models/inspect", json={"config": config, "name": "mine",
                                                 "seq_len": 2048})
    assert r.status_code == 200, r.text
    want = model_summary("mixtral-8x7b", 2048)
    got = r.json()
    for key in ("params_total", "params_active", "layers", "attention",
                "forward_flops_per_token", "training_flops_per_token",
                "kv_cache_bytes_per_token"):
        assert got[key] == pytest.approx(want[key]), key
    assert client.post("/api/models/inspect",
                       json={"model": "llama-3.1-8b"}).json()["params_total"] == \
        model_summary("llama-3.1-8b", 4096)["params_total"]


@pytest.mark.parametrize("path, body, status, words", [
    ("/api/plan/train", dict(TRAIN_BODY, gpus=["h100", "a100", "l40s", "b200"]), 422,
     "gpus"),
    ("/api/plan/train", dict(TRAIN_BODY, max_count=100_000), 422, "max_count"),
    ("/api/plan/train", dict(TRAIN_BODY, min_count=1, max_count=4096, count_step=1), 422,
     "search space"),
    ("/api/plan/train", dict(TRAIN_BODY, min_count=64, max_count=8), 422, "min_count"),
    ("/api/simulate/serve", dict(SIM_BODY, traffic=dict(TRAFFIC, num_requests=10**7)), 422,
     "num_requests"),
    ("/api/plan/serve", dict(PLAN_SERVE_BODY, traffic=dict(TRAFFIC, num_requests=20_000)),
     422, "planning cap"),
    ("/api/plan/serve", dict(PLAN_SERVE_BODY, max_replicas=1000), 422, "max_replicas"),
    ("/api/simulate/serve", dict(SIM_BODY, replicas=0), 422, "replicas"),
    ("/api/simulate/serve", dict(SIM_BODY, gpu="h1000"), 422, "did you mean"),
    ("/api/simulate/serve", dict(SIM_BODY, surprise=1), 422, "surprise"),
    # the library's hardware.counts is no field of the form (it named it)
    ("/api/plan/train", dict(TRAIN_BODY, min_count=8, max_count=64, count_step=3), 422,
     "or allow 8 or 64 GPUs (min_count, max_count or count_step)"),
    # a training plan takes its config.json in the same request (it sent users to
    # /api/models/inspect)
    ("/api/plan/train", dict(TRAIN_BODY, model="../x"), 422,
     "the web UI reads no files (send a config.json's contents as config, in place of "
     "model)"),
    ("/api/models/inspect", {"config": {"model_type": "llama", "pad": "x" * 100_000}}, 413,
     "config"),
    ("/api/models/inspect", {"config": {"model_type": "llama"}}, 422, "hidden_size"),
    ("/api/models/inspect", {"config": {"model_type": "nope"}}, 422, "model_type"),
    # per-layer work is linear in the layer count: 10**12 layers hung the server
    ("/api/models/inspect", {"config": {"model_type": "llama", "hidden_size": 64,
                                        "num_hidden_layers": 10**6, "num_attention_heads": 4,
                                        "intermediate_size": 128, "vocab_size": 100}}, 422,
     "num_hidden_layers"),
])
def test_caps_and_bad_input_answer_4xx_with_the_reason(client, path, body, status, words):
    r = client.post(path, json=body)
    assert r.status_code == status, r.text
    assert words in r.json()["detail"]


def test_body_size_cap(client):
    big = b'{"config": {"x": "' + b"a" * 300_000 + b'"}}'
    r = client.post("/api/models/inspect", content=big,
                    headers={"content-type": "application/json"})
    assert r.status_code == 413 and "cap" in r.json()["detail"]

    def chunks():  # no content-length: the limit counts streamed bytes
        for _ in range(40):
            yield b"a" * 10_000

    r = client.post("/api/models/inspect", content=chunks(),
                    headers={"content-type": "application/json"})
    assert r.status_code == 413


@pytest.mark.parametrize("name", ["../../etc/passwd", "/etc/passwd",
                                  "examples/serve-llama8b-chat.yaml", "..", "pyproject.toml",
                                  "C:\\Windows\\win.ini", "file:///etc/passwd",
                                  "~/.ssh/id_rsa", "README.md"])
@pytest.mark.parametrize("path, field", [("/api/plan/train", "model"),
                                         ("/api/plan/train", "storage"),
                                         ("/api/simulate/serve", "gpu"),
                                         ("/api/simulate/serve", "engine"),
                                         ("/api/models/inspect", "model")])
def test_path_like_names_are_refused(client, path, field, name):
    body = {"/api/plan/train": TRAIN_BODY, "/api/simulate/serve": SIM_BODY,
            "/api/models/inspect": {}}[path]
    r = client.post(path, json=dict(body, **{field: name}))
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert "root:" not in detail and "[project]" not in detail  # no file content leaks


def test_openapi_schema_and_no_cdn(client):
    schema = client.get("/openapi.json").json()
    assert {"/api/plan/train", "/api/plan/serve", "/api/simulate/serve",
            "/api/models/inspect", "/api/catalog/{kind}"} <= set(schema["paths"])
    assert client.get("/docs").status_code == 404  # its page would load a CDN script
    for page in ("/", "/train", "/serve"):
        html = client.get(page).text
        assert "http://" not in html and "https://" not in html
    js = client.get("/static/plotly.min.js")
    assert js.status_code == 200 and "plotly" in js.text[:500]


def test_plan_train_takes_an_uploaded_config_and_exactly_one_model(client):
    from infraplan.catalog import MODELS_DIR, load_catalog

    config = json.loads((MODELS_DIR / load_catalog().models.get("llama-3.1-8b")
                         .config_file).read_text())
    body = {k: v for k, v in TRAIN_BODY.items() if k != "model"}
    uploaded = client.post("/api/plan/train", json={**body, "config": config,
                                                    "name": "my-llama"})
    catalog = client.post("/api/plan/train", json=TRAIN_BODY)
    assert uploaded.status_code == catalog.status_code == 200, uploaded.text
    # the same architecture plans the same, whatever it is called
    assert uploaded.json()["result"]["best"][0]["step_s"] == \
        catalog.json()["result"]["best"][0]["step_s"]
    both = client.post("/api/plan/train", json={**TRAIN_BODY, "config": config})
    neither = client.post("/api/plan/train", json=body)
    assert both.status_code == neither.status_code == 422
    assert "exactly one" in both.json()["detail"]


def test_serving_takes_an_uploaded_config(client):
    from infraplan.catalog import MODELS_DIR, load_catalog

    config = json.loads((MODELS_DIR / load_catalog().models.get("llama-3.1-8b")
                         .config_file).read_text())
    for path, base in (("/api/simulate/serve", SIM_BODY), ("/api/plan/serve", PLAN_SERVE_BODY)):
        body = {k: v for k, v in base.items() if k != "model"}
        uploaded = client.post(path, json={**body, "config": config, "name": "mine"})
        catalog = client.post(path, json=base)
        assert uploaded.status_code == catalog.status_code == 200, uploaded.text
        # the same architecture serves the same, whatever it is called
        got, want = uploaded.json()["result"], catalog.json()["result"]
        if path.endswith("simulate/serve"):
            assert got["throughput"] == want["throughput"]
        else:
            for answer in (got, want):
                answer["best"]["deployment"].pop("model")
            assert got["best"] == want["best"]
        assert client.post(path, json={**base, "config": config}).status_code == 422


def test_serving_defaults_to_the_checkpoints_format(client):
    """The form sent bf16 unless told otherwise: a V100 simulation was refused (no bf16)
    and gpt-oss-120b (an MXFP4 checkpoint) did not fit one H100. Unset, the weight format
    is the checkpoint's, as the CLI has it; a plan searches it as `checkpoint`."""
    body = {k: v for k, v in SIM_BODY.items() if k != "weight_dtype"}
    for gpu, model, expected in (("v100", "llama-3.1-8b", "fp16"),
                                 ("h100", "gpt-oss-120b", "fp4")):
        r = client.post("/api/simulate/serve", json={**body, "gpu": gpu, "model": model,
                                                     "sweep": False})
        assert r.status_code == 200, r.text
        assert r.json()["result"]["deployment"]["weight_dtype"] == expected
    plan = {k: v for k, v in PLAN_SERVE_BODY.items() if k != "weight_dtypes"}
    r = client.post("/api/plan/serve", json={**plan, "model": "gpt-oss-120b", "gpus": ["h100"]})
    assert r.status_code == 200, r.text
    best = r.json()["result"]["best"]["deployment"]
    assert (best["weight_dtype"], best["tp"]) == ("fp4", 1)
    assert any(n.startswith("weight formats searched: fp4, fp8; checkpoint is fp4")
               for n in r.json()["result"]["notes"])


def test_report_notes_name_the_request_fields_not_the_scenario_paths(client):
    """A note's fix named YAML paths the web form has no field for ('set
    deployment.weight_dtype', 'set training.precision'); the report says the request's
    field, while `result` stays the library's JSON, as --json prints it."""
    body = dict(SIM_BODY, model="gpt-oss-120b")
    body.pop("weight_dtype")
    served = client.post("/api/simulate/serve", json=body).json()
    assert "set weight_dtype to serve another format" in served["html"]
    assert "deployment.weight_dtype" not in json.dumps(served["document"]) + served["html"]
    trained = client.post("/api/plan/train", json=dict(
        TRAIN_BODY, gpus=["h100", "v100-sxm2-32gb"], precision="bf16")).json()
    fix = "(set precision to fp16 or fp32 to plan it)"
    assert fix in trained["html"] and fix in json.dumps(trained["document"])
    assert "training.precision" not in trained["html"]
    assert any("set training.precision to fp16" in n for n in trained["result"]["notes"])
    # left empty, the precision is each chip's 16-bit type: the V100 is planned in fp16
    mixed = client.post("/api/plan/train", json=dict(
        TRAIN_BODY, gpus=["h100", "v100-sxm2-32gb"])).json()["result"]
    assert {p["accelerator"]: p["precision"] for p in mixed["by_accelerator"]} == {
        "h100-sxm5-80gb": "bf16", "v100-sxm2-32gb": "fp16"}


def test_a_table_with_no_rows_says_none(client):
    """'configurations that meet the SLOs' was a header over nothing when none did."""
    answer = client.post("/api/plan/serve", json={
        "model": "llama-3.1-8b", "gpus": ["h100"], "tp": [1], "weight_dtypes": ["checkpoint"],
        "traffic": {"num_requests": 200}, "slo": {"e2e_p99_s": 0.01}}).json()
    (met,) = [t for s in answer["document"]["sections"] for t in s["tables"]
              if t["title"].startswith("configurations that meet the SLOs")]
    assert met["rows"] == []
    html = answer["html"]
    start = html.index("<caption>configurations that meet the SLOs")
    assert html[start:].split("</tbody>")[0].endswith(
        '<tbody><tr><td class="empty" colspan="7">none</td></tr>')


def test_why_other_choices_lost_is_said_once_over_a_list(client):
    """The training page repeated 'Why other choices lost:' about 30 times."""
    from html import escape

    answer = client.post("/api/plan/train", json={"model": "llama-3.1-8b",
                                                  "gpus": ["h100-sxm5-80gb"],
                                                  "min_count": 8, "max_count": 64}).json()
    reasons = [p.removeprefix("Why other choices lost: ") for s in answer["document"]["sections"]
               for p in s["paragraphs"] if p.startswith("Why other choices lost: ")]
    html = answer["html"]
    assert len(reasons) > 10 and html.count("Why other choices lost") == 1
    listed = html.split('<p class="para">Why other choices lost:</p><ul class="paras">')[1]
    assert listed.split("</ul>")[0] == "".join(f"<li>{escape(r)}</li>" for r in reasons)
