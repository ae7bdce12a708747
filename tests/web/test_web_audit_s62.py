"""Session 62's first-time-user audit of the web UI: the API's documented error answers,
its status codes, the pages' titles and 404, and the library's text in the form's terms."""

from __future__ import annotations

import json

import pytest

HINT = "send a JSON object with Content-Type: application/json"
POSTS = ("/api/plan/train", "/api/plan/serve", "/api/simulate/serve", "/api/memory",
         "/api/models/inspect")


# 1. the schema documents the answers the server sends: {"detail": "<one line>"}

def test_openapi_documents_every_error_answer_as_one_detail_string(app):
    spec = app.openapi()
    assert spec["components"]["schemas"]["ErrorAnswer"] == {
        "properties": {"detail": {"type": "string", "title": "Detail",
                                  "description": "what is wrong, naming the field, and "
                                                 "'To fix: ...'"}},
        "type": "object", "required": ["detail"], "title": "ErrorAnswer",
        "description": "Every refused or failed request's answer: one line, the field "
                       "first and the fix."}
    assert "HTTPValidationError" not in json.dumps(spec)
    ref = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorAnswer"}}}
    for path in POSTS:
        answers = spec["paths"][path]["post"]["responses"]
        assert sorted(answers) == ["200", "413", "415", "422", "500"], path
        for status in ("413", "415", "422", "500"):
            assert answers[status]["content"] == ref, (path, status)
    catalog = spec["paths"]["/api/catalog/{kind}"]["get"]["responses"]
    assert sorted(catalog) == ["200", "413", "422", "500"]
    assert catalog["422"]["content"] == ref


def test_a_422_answer_matches_its_documented_schema(client):
    r = client.post("/api/plan/train", json={"model": "llama-3.1-8b", "gpus": ["h100"],
                                             "tokens": -1})
    assert r.status_code == 422
    assert r.json() == {"detail": "tokens: Input should be greater than 0 (got -1)"}


# 8. titles, a browser's 404, the status of a body that is not JSON

def test_home_page_title_is_not_doubled(client):
    assert "<title>infraplan</title>" in client.get("/").text
    assert "<title>Memory: infraplan</title>" in client.get("/memory").text


def test_an_unknown_page_is_an_html_404_with_the_closest_page(client):
    r = client.get("/memoryx")
    assert r.status_code == 404
    assert r.headers["content-type"] == "text/html; charset=utf-8"
    assert "<title>Page not found: infraplan</title>" in r.text
    assert ('<p>There is no page at <code>/memoryx</code>. Did you mean '
            '<a href="/memory">/memory</a>?</p>') in r.text


def test_an_unknown_api_path_stays_json(client):
    r = client.get("/api/nope")
    assert (r.status_code, r.json()) == (404, {"detail": "Not Found"})


def test_a_body_declared_text_plain_is_415(client):
    r = client.post("/api/memory", content=b'{"gpu": "h100"}',
                    headers={"content-type": "text/plain"})
    assert r.status_code == 415
    assert r.json() == {"detail": f"body: Content-Type 'text/plain' is not JSON; {HINT}"}


@pytest.mark.parametrize("size, status", [(100_000, 422), (300_000, 413)])
def test_the_size_cap_comes_before_the_json_check(client, size, status):
    # the cap is 256 KiB: a 100 kB body is under it, so its malformed JSON is what is wrong
    r = client.post("/api/plan/train", content=b"x" * size,
                    headers={"content-type": "application/json"})
    assert r.status_code == status, r.text


# 4. a training request's range errors open with the field and give the fix

TRAIN = {"model": "gpt3-175b", "gpus": ["a100"]}


@pytest.mark.parametrize("extra, detail", [
    ({"min_count": 64, "max_count": 8},
     "min_count 64 exceeds max_count 8. To fix: lower min_count to 8 or less, or raise "
     "max_count to 64 or more"),
    ({"min_count": 1, "max_count": 4096, "count_step": 1},
     "count_step: the search space of 1..4096 GPUs in steps of 1 is 4,096 GPU counts, over "
     "the web's cap of 512 searched. To fix: raise count_step to 9 or more, narrow "
     "min_count..max_count (or run `infraplan plan train` locally)"),
    ({"gpus": ["a100", "h100"], "min_count": 1, "max_count": 4096},  # a node's 8: 515
     "count_step: the search space of 1..4096 GPUs in steps of 8 is 515 GPU counts x 2 "
     "accelerators, over the web's cap of 512 searched. To fix: raise count_step to 17 or "
     "more, narrow min_count..max_count or compare fewer accelerators (or run `infraplan "
     "plan train` locally)"),
], ids=["min-over-max", "step-1", "default-step-2-gpus"])
def test_count_range_refusals_open_with_the_field_and_fix(client, extra, detail):
    r = client.post("/api/plan/train", json=dict(TRAIN, **extra))
    assert (r.status_code, r.json()) == (422, {"detail": detail})


# 5. an unknown catalog name opens with the request's field that named it

@pytest.mark.parametrize("path, body, detail", [
    ("/api/plan/train", {"model": "llama-3.1-8b", "gpus": ["a10O"]},
     "gpus: unknown accelerator 'a10O'; did you mean 'a10', 'a10g', 'a100-sxm4-80gb'? To fix: "
     "pick one from /api/catalog/gpus"),
    ("/api/plan/train", {"model": "lama-3.1-8b", "gpus": ["a100"]},
     "model: unknown model 'lama-3.1-8b'; did you mean 'llama-3.1-8b', 'llama-3-8b', "
     "'llama-3.1-70b'? To fix: pick one from /api/catalog/models"),
    ("/api/simulate/serve", {"model": "llama-3.1-8b", "gpu": "h100", "engine": "vlm"},
     "engine: unknown engine 'vlm'; did you mean 'vllm'? To fix: pick one from "
     "/api/catalog/engines"),
    ("/api/simulate/serve", {"model": "llama-3.1-8b", "gpu": "../x"},
     "gpu: accelerator '../x' is not a catalog name (letters, digits, '.', '-', '_'). To fix: "
     "pick one from /api/catalog; the web UI reads no files"),
    ("/api/plan/serve", {"model": "llama-3.1-8b", "gpus": ["h1000"], "engine": "vllm"},
     "gpus: unknown accelerator 'h1000'; did you mean 'h100-sxm5-80gb', 'v100-sxm2-32gb', "
     "'h800-sxm5-80gb'? To fix: pick one from /api/catalog/gpus"),
    ("/api/models/inspect", {"model": "lama-3.1-8b"},
     "model: unknown model 'lama-3.1-8b'; did you mean 'llama-3.1-8b', 'llama-3-8b', "
     "'llama-3.1-70b'? To fix: pick one from /api/catalog/models"),
])
def test_unknown_names_open_with_their_field(client, path, body, detail):
    r = client.post(path, json=body)
    assert (r.status_code, r.json()) == (422, {"detail": detail})


def test_an_unknown_storage_tier_opens_with_storage(client):
    r = client.post("/api/plan/train", json={"model": "llama-3.1-8b", "gpus": ["a100"],
                                             "storage": "nope"})
    assert r.json()["detail"].startswith("storage: unknown storage tier 'nope'; valid choices: ")


# 3. the notes never ask a web user to set a key the request lacks

SMALL_TRAIN = {"model": "llama-3.1-8b", "gpus": ["h100"], "tokens": 1e10, "min_count": 8,
               "max_count": 16}
SCENARIO_ONLY = ("set hardware.system or hardware.network to plan others",
                 "(set energy.region for the grid you run on)", "catalog/data/",
                 "`infraplan simulate train` draws")


@pytest.fixture(scope="module")
def train_answer(client):
    r = client.post("/api/plan/train", json=SMALL_TRAIN)
    assert r.status_code == 200, r.text
    return r.json()


def test_the_request_models_have_no_node_type_network_or_grid():
    from infraplan.web.api import PlanServeRequest, SimulateServeRequest, TrainRequest

    for model in (TrainRequest, PlanServeRequest, SimulateServeRequest):
        assert not {"system", "network", "hardware", "energy", "region"} & set(
            model.model_fields), model


def test_train_notes_say_where_the_node_type_and_grid_are_set(train_answer):
    text = json.dumps(train_answer["document"]) + train_answer["html"]
    for phrase in SCENARIO_ONLY:
        assert phrase not in text, phrase
    assert ("8 x ib-ndr-400 400 Gb/s between nodes); this page plans these; to plan others, "
            "set hardware.system or hardware.network in a scenario file for `infraplan plan "
            "train`") in text
    assert ("(this page uses the world average; for the grid you run on, set energy.region "
            "in a scenario file for `infraplan plan train`)") in text
    assert "(run-goodput in the catalog calibration data)" in text
    assert ("`infraplan simulate train` (the CLI; this page does not simulate a training run) "
            "draws the run with that model") in text


def test_serve_notes_say_where_the_grid_is_set(client):
    r = client.post("/api/simulate/serve", json={
        "model": "llama-3.1-8b", "gpu": "h100", "sweep": False,
        "traffic": {"num_requests": 200}})
    assert r.status_code == 200, r.text
    text = json.dumps(r.json()["document"]) + r.json()["html"]
    assert "(set energy.region for the grid you run on)" not in text
    assert ("(this page uses the world average; for the grid you run on, set energy.region "
            "in a scenario file for `infraplan plan serve`)") in text


def test_a_network_bound_note_says_where_its_keys_are_set():
    from infraplan.errors import InputError
    from infraplan.web.answers import TRAIN_TERMS, in_request_terms
    from infraplan.web.api import TrainRequest

    note = ("network-bound: b's best plan (64 GPUs, 8 per node over 1 x eth) spends 40% of "
            "its step in data-parallel and pipeline communication: a faster scale-out network "
            "(hardware.network, for example ib-ndr-400) or a node type with more accelerators "
            "(hardware.system) would shorten it")

    @in_request_terms(TrainRequest, "hardware|training|constraints", *TRAIN_TERMS)
    def endpoint():
        raise InputError(note)

    with pytest.raises(InputError) as caught:
        endpoint()
    assert str(caught.value) == note + " (set in a scenario file for `infraplan plan train`)"


# 7. the forms' defaults and the API's: the same, or the page says where they differ

def _selected(html: str, name: str) -> list[str]:
    import re

    select = re.search(rf'<select name="{name}"[^>]*>(.*?)</select>', html, re.S)[1]
    return re.findall(r'<option value="([^"]*)" selected>', select)


def test_the_serve_form_searches_the_apis_default_weight_formats(client):
    from infraplan.web.api import PlanServeRequest

    default = PlanServeRequest.model_fields["weight_dtypes"].default
    assert default == ["checkpoint", "fp8"]
    assert _selected(client.get("/serve").text, "weight_dtypes") == default


def test_the_memory_page_says_its_defaults_differ_from_the_apis(client):
    from infraplan.web.memory import MemoryRequest

    fields = MemoryRequest.model_fields
    assert (fields["num_gpus"].default, fields["zero"].default) == (1, 0)
    html = client.get("/memory").text
    assert _selected(html, "zero") == ["1"]
    assert 'name="num_gpus" data-type="int" value="8"' in html
    assert ("The form starts from 8 accelerators with ZeRO-1 (a common data-parallel job); "
            "the CLI\nand <code>/api/memory</code>, given no <code>num_gpus</code> or "
            "<code>zero</code>, check 1\naccelerator with ZeRO-0.") in html


def test_cost_and_power_notes_say_where_their_keys_are_set(train_answer):
    """The unbilled costs (costs.*) and the servers' host draw (energy.host_w_per_node)
    are keys of a scenario file: the form has prices alone."""
    from infraplan.web.api import TrainRequest

    assert not {"costs", "energy"} & set(TrainRequest.model_fields)
    text = json.dumps(train_answer["document"]) + train_answer["html"]
    where = "in a scenario file for `infraplan plan train`"
    assert "set those keys to add them" not in text
    assert f"; this page bills compute alone: set those keys {where} to add them" in text
    assert "set energy.host_w_per_node to add it" not in text
    assert f"set energy.host_w_per_node {where} to add it" in text
    assert "and costs.checkpoint_tier: " in text and f" {where} to bill one kept copy" in text
