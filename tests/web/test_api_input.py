"""Bad request bodies answer 422 JSON with one message naming the field, the value and the
fix, in the request's own terms: malformed JSON, booleans or strings for numbers, NaN,
uploaded configs with absurd sizes, hints that name scenario paths."""

from __future__ import annotations

import json

import pytest

from tests.web.test_api import PLAN_SERVE_BODY, SIM_BODY, TRAFFIC, TRAIN_BODY

JSON = {"content-type": "application/json"}
HINT = "send a JSON object with Content-Type: application/json"
TINY = {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100}
SMALL_TRAFFIC = dict(TRAFFIC, num_requests=50)
UPLOADED = {  # each endpoint's body with an uploaded config instead of a catalog model
    "/api/models/inspect": {},
    "/api/plan/train": {k: v for k, v in TRAIN_BODY.items() if k != "model"},
    "/api/simulate/serve": {**{k: v for k, v in SIM_BODY.items() if k != "model"},
                            "traffic": SMALL_TRAFFIC, "sweep": False},
    "/api/plan/serve": {**{k: v for k, v in PLAN_SERVE_BODY.items() if k != "model"},
                        "traffic": SMALL_TRAFFIC},
}


def _post_literal(client, path: str, body: dict, literal: str):
    """POST body with the string value "X" replaced by a raw JSON literal (NaN, 1e400)."""
    text = json.dumps(body).replace('"X"', literal)
    return client.post(path, content=text.encode(), headers=JSON)


@pytest.mark.parametrize("path", sorted(UPLOADED))
@pytest.mark.parametrize("key, literal, shown", [
    # 10**400 overflowed float in the FLOP maths: HTTP 500 text/plain
    ("vocab_size", "1" + "0" * 400, "1000000000000000000000000000000000000000... "
                                    "(401 characters)"),
    ("hidden_size", "1e400", "inf"),
    ("num_attention_heads", str(2**31), "2147483648"),
], ids=["vocab_size=10**400", "hidden_size=1e400", "heads=2**31"])
def test_uploaded_config_sizes_out_of_range_are_422_naming_key_value_range(client, path, key,
                                                                         literal, shown):
    body = dict(UPLOADED[path], config=dict(TINY, **{key: "X"}))
    r = _post_literal(client, path, body, literal)
    assert r.status_code == 422, r.text
    assert r.json() == {"detail": f"config.json: {key} must be a whole number from 1 to "
                                  f"2,147,483,647, got {shown}. To fix: set \"{key}\" to "
                                  "the model's real size"}


@pytest.mark.parametrize("content, headers, detail", [
    (b'{"model": ', JSON, "malformed JSON at character 10 (Expecting value)"),
    (b"[" * 100_000 + b"]" * 100_000, JSON, "malformed JSON (nested too deeply)"),
    (b'{"tokens": ' + b"9" * 5000 + b"}", JSON,
     "malformed JSON (an integer of more than 4,300 digits)"),
    (b"", JSON, "empty"),
    (b"\xff\xfe{", JSON, "not UTF-8 text"),
    (b"[]", JSON, "an array, not a JSON object"),
    (b"null", JSON, "null, not a JSON object"),
    (b"12", JSON, "a number, not a JSON object"),
    (json.dumps(TRAIN_BODY).encode(), {"content-type": "text/plain"},
     "Content-Type 'text/plain' is not JSON"),
    (json.dumps(TRAIN_BODY).encode(), {}, "no Content-Type"),
], ids=["truncated", "deep", "4300-digits", "empty", "utf16", "array", "null", "number",
        "text-plain", "no-content-type"])
def test_malformed_bodies_are_one_422_with_the_reason(client, content, headers, detail):
    r = client.post("/api/plan/train", content=content, headers=headers)
    # a body not declared JSON is an unsupported media type: 415, the same one message
    assert r.status_code == (415 if "Content-Type" in detail else 422), r.text
    assert r.json() == {"detail": f"body: {detail}; {HINT}"}


@pytest.mark.parametrize("content_type", ["application/json; charset=utf-8",
                                          "application/merge-patch+json"])
def test_json_content_types_with_parameters_or_suffixes_are_read(client, content_type):
    r = client.post("/api/models/inspect", content=json.dumps({"config": TINY}).encode(),
                    headers={"content-type": content_type})
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("path, body, field, literal, shown", [
    ("/api/plan/train", TRAIN_BODY, "tokens", "NaN", "NaN"),
    ("/api/plan/train", TRAIN_BODY, "tokens", "Infinity", "Infinity"),
    ("/api/plan/train", TRAIN_BODY, "tokens", "1e400", "Infinity"),  # Python reads inf
    ("/api/plan/train", TRAIN_BODY, "global_batch", "-Infinity", "-Infinity"),
    ("/api/plan/train", TRAIN_BODY, "deadline_days", "NaN", "NaN"),
    ("/api/plan/train", TRAIN_BODY, "tokens", "1" + "0" * 400,
     "100000000000000000000000000000... (401 characters)"),
])
def test_non_finite_numbers_say_so(client, path, body, field, literal, shown):
    r = _post_literal(client, path, dict(body, **{field: "X"}), literal)
    assert r.status_code == 422, r.text
    assert r.json() == {"detail": f"{field}: must be a finite number, got {shown}"}


def test_non_finite_numbers_in_nested_fields_name_the_path(client):
    body = dict(SIM_BODY, traffic=dict(TRAFFIC, rate_per_s="X"))
    r = _post_literal(client, "/api/simulate/serve", body, "Infinity")
    assert r.json() == {"detail": "traffic.rate_per_s: must be a finite number, got Infinity"}


@pytest.mark.parametrize("path, body, change, detail", [
    ("/api/plan/train", TRAIN_BODY, {"tokens": True}, "tokens: must be a JSON number, got true"),
    ("/api/plan/train", TRAIN_BODY, {"global_batch": True},
     "global_batch: must be a JSON number, got true"),
    ("/api/plan/train", TRAIN_BODY, {"global_batch": "128"},
     'global_batch: must be a JSON number, got "128"'),
    ("/api/plan/train", TRAIN_BODY, {"min_count": None},
     "min_count: must be a JSON number, got null"),
    ("/api/simulate/serve", SIM_BODY, {"sweep": "yes"},
     'sweep: Input should be a valid boolean (got "yes")'),
    ("/api/simulate/serve", SIM_BODY, {"sweep": 1}, "sweep: Input should be a valid boolean "
                                                    "(got 1)"),
    ("/api/simulate/serve", SIM_BODY, {"tp": True}, "tp: must be a JSON number, got true"),
    ("/api/plan/serve", PLAN_SERVE_BODY, {"tp": ["2"]}, 'tp.0: must be a JSON number, got "2"'),
    ("/api/simulate/serve", SIM_BODY, {"traffic": dict(TRAFFIC, num_requests=False)},
     "traffic.num_requests: must be a JSON number, got false"),
])
def test_booleans_and_strings_are_not_numbers(client, path, body, change, detail):
    r = client.post(path, json=dict(body, **change))
    assert r.status_code == 422, r.text
    assert r.json() == {"detail": detail}


def test_whole_numbers_written_as_floats_are_accepted(client):
    """JSON has one number type: 128.0 global batch and an integer token count are fine."""
    want = client.post("/api/plan/train", json=dict(TRAIN_BODY, min_count=8, max_count=8))
    got = client.post("/api/plan/train", json=dict(TRAIN_BODY, min_count=8.0, max_count=8,
                                                   global_batch=128.0, tokens=10**11))
    assert want.status_code == got.status_code == 200, got.text
    assert got.json()["result"]["best"] == want.json()["result"]["best"]


def test_one_accelerator_under_two_names_is_planned_once(client):
    body = dict(TRAIN_BODY, min_count=8, max_count=16)
    once = client.post("/api/plan/train", json=dict(body, gpus=["h100"])).json()["result"]
    twice = client.post("/api/plan/train",
                        json=dict(body, gpus=["h100", "h100-sxm5-80gb"])).json()["result"]
    for key in ("best", "frontier", "by_accelerator", "configs_evaluated"):
        assert twice[key] == once[key], key


def test_one_accelerator_under_two_names_is_planned_once_for_serving(client):
    body = dict(PLAN_SERVE_BODY, traffic=SMALL_TRAFFIC)
    once = client.post("/api/plan/serve", json=dict(body, gpus=["h100"])).json()["result"]
    twice = client.post("/api/plan/serve",
                        json=dict(body, gpus=["h100", "h100-sxm5-80gb"])).json()["result"]
    for key in ("best", "alternatives", "rejected", "simulations"):
        assert twice[key] == once[key], key


@pytest.mark.parametrize("path, body, detail", [
    ("/api/plan/train", dict(TRAIN_BODY, min_count=3, max_count=3),
     "no GPU count between 3 and 3 in steps of 8. To fix: widen min_count/max_count or lower "
     "count_step"),
    ("/api/plan/train", dict(TRAIN_BODY, min_count=64, max_count=8),
     "min_count 64 exceeds max_count 8"),
    ("/api/plan/train", dict(TRAIN_BODY, storage="nope"),
     "pick one from /api/catalog/storage"),
    ("/api/plan/train", dict(TRAIN_BODY, model="llama-3.1-405b", gpus=["l4"], min_count=8,
                             max_count=8),
     "To fix: allow more GPUs than 8 (max_count)"),
    ("/api/simulate/serve", dict(SIM_BODY, model="llama-3.1-405b", gpu="l4"),
     # the body's weights are fp8 already: only the smaller int4 is offered
     "To fix: raise tp (now 1), quantize the weights (int4) or pick a GPU with more memory"),
    ("/api/simulate/serve", {**UPLOADED["/api/simulate/serve"],
                             "config": dict(TINY, vocab_size=10**8)},
     "To fix: pick an engine with lower batch limits (now 1,024 sequences, 16,384 batched "
     "tokens), or raise tp (now 1), quantize"),
    ("/api/simulate/serve", dict(SIM_BODY, traffic=dict(
        SMALL_TRAFFIC, input_mean_tokens=1e6, output_mean_tokens=1e6)),
     "shorten the requests (traffic.input_mean_tokens / traffic.output_mean_tokens)"),
    ("/api/simulate/serve", dict(SIM_BODY, traffic=dict(SMALL_TRAFFIC, input_mean_tokens=1000,
                                                        input_max_tokens=10)),
     "traffic.input_mean_tokens 1000 is above max (10): lengths clipped to min..max cannot "
     "average 1000; to fix: raise traffic.input_max_tokens, or lower "
     "traffic.input_mean_tokens"),
    ("/api/simulate/serve", dict(SIM_BODY, traffic=dict(SMALL_TRAFFIC, rate_per_s=1e-9)),
     "To fix: raise traffic.rate_per_s, or lower traffic.num_requests"),
    # the request's own bounds are the library's: no "scenario." path leaks through
    ("/api/simulate/serve", dict(SIM_BODY, traffic=dict(SMALL_TRAFFIC, arrival="gamma",
                                                        cv=0.001)),
     "traffic.cv: Input should be greater than or equal to 0.01 (got 0.001)"),
])
def test_fix_hints_name_the_requests_fields(client, path, body, detail):
    """The library speaks of scenario paths (hardware.min_count, counts, pp, max_num_seqs);
    a request has none of them."""
    r = client.post(path, json=body)
    assert r.status_code == 422, r.text
    got = r.json()["detail"]
    assert detail in got
    for absent in ("hardware.", "set counts", "or pp (", "max_num_seqs", "batch_size",
                   "traffic.input /", "infraplan catalog", "time_scale", "scenario."):
        assert absent not in got
