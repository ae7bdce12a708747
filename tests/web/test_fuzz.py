"""No 5xx on any input: hypothesis mutates valid requests field by field (and sends junk)
against every POST endpoint of the OpenAPI schema."""

from __future__ import annotations

import json

import pytest

from tests.conftest import require
from tests.web.test_api import PLAN_SERVE_BODY, SIM_BODY, TRAIN_BODY
from tests.web.test_memory_page import FUZZ_BODY as MEMORY_BODY

hypothesis = require("hypothesis")
st = hypothesis.strategies

JSON = st.recursive(st.none() | st.booleans() | st.integers(-10**12, 10**12)
                    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
                    lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=8)
NAMES = st.sampled_from(["h100", "llama-3.1-8b", "../x", "", "a" * 200, "l40s", "vllm",
                         "fsx-lustre-p2-125", "mixtral-8x7b", "tpu-v5e", "cpu"])
BASES = {"/api/plan/train": TRAIN_BODY, "/api/simulate/serve": SIM_BODY,
         "/api/plan/serve": PLAN_SERVE_BODY, "/api/memory": MEMORY_BODY,
         "/api/models/inspect": {"config": {"model_type": "llama", "hidden_size": 64,
                                            "num_hidden_layers": 2,
                                            "num_attention_heads": 4,
                                            "intermediate_size": 128, "vocab_size": 100}}}


def _mutate(base: dict, data) -> dict:
    body = {k: (dict(v) if isinstance(v, dict) else v) for k, v in base.items()}
    for _ in range(data.draw(st.integers(1, 3))):
        target = body
        if not body:
            break
        key = data.draw(st.sampled_from(sorted(body)))
        if isinstance(body[key], dict) and body[key] and data.draw(st.booleans()):
            target = body[key]
            key = data.draw(st.sampled_from(sorted(target)))
        value = data.draw(st.one_of(JSON, NAMES, st.integers(-5, 70_000),
                                    st.floats(-1, 1e7), st.lists(NAMES, max_size=4)))
        if data.draw(st.integers(0, 9)) == 0:
            target.pop(key, None)
        else:
            target[key] = value
    return body


@pytest.fixture
def small_caps(monkeypatch):
    """Valid requests stay cheap: fewer GPU counts and planning requests than in service."""
    from infraplan.web import api

    monkeypatch.setattr(api, "MAX_COUNT_CHOICES", 16)
    monkeypatch.setattr(api, "MAX_PLAN_REQUESTS", 300)
    monkeypatch.setattr(api, "SWEEP_REQUESTS", 100)


@pytest.mark.parametrize("path", sorted(BASES))
def test_no_server_error_on_mutated_requests(client, small_caps, path):
    @hypothesis.settings(max_examples=40, deadline=None, derandomize=True,
                         suppress_health_check=list(hypothesis.HealthCheck))
    @hypothesis.given(data=st.data())
    def run(data):
        body = _mutate(BASES[path], data)
        if path != "/api/models/inspect" and "traffic" in body and isinstance(
                body["traffic"], dict) and isinstance(body["traffic"].get("num_requests"),
                                                      int):
            body["traffic"]["num_requests"] = min(body["traffic"]["num_requests"], 2000)
        r = client.post(path, json=body)
        assert r.status_code < 500, (body, r.text)
        if r.status_code >= 400:
            assert isinstance(r.json()["detail"], str) and r.json()["detail"]

    run()


@hypothesis.settings(max_examples=40, deadline=None, derandomize=True,
                     suppress_health_check=list(hypothesis.HealthCheck))
@hypothesis.given(path=st.sampled_from(sorted(BASES)), body=JSON | st.binary(max_size=64))
def test_no_server_error_on_junk(client, path, body):
    if isinstance(body, bytes):
        r = client.post(path, content=body, headers={"content-type": "application/json"})
    else:
        r = client.post(path, json=body)
    assert r.status_code < 500, r.text


@pytest.mark.parametrize("literal", [b"NaN", b"Infinity", b"-Infinity", b"1e999"])
def test_non_finite_numbers_are_refused(client, literal):
    text = json.dumps(dict(SIM_BODY, traffic=dict(SIM_BODY["traffic"], rate_per_s="X")))
    r = client.post("/api/simulate/serve", content=text.encode().replace(b'"X"', literal),
                    headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    assert "rate_per_s" in r.json()["detail"]
