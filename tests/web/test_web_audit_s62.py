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
