"""Session 62's audit in the browser: Back and Forward between runs, wide tables on a
phone."""

from __future__ import annotations

import os

import pytest

from tests.web.conftest import CHROMIUM
from tests.web.test_browser import DESKTOP, PHONE, _page, _text

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"no Chromium at {CHROMIUM}")
WAIT_MS = 30_000


def _run(page, before: str) -> None:
    """Submit and wait for this run's answer (data-done changes)."""
    page.click("button[type=submit]")
    page.wait_for_function(f"document.querySelector('form.plan').getAttribute('data-done') "
                           f"!== {before!r}", timeout=WAIT_MS)


def _done(page) -> str:
    return page.get_attribute("form.plan", "data-done") or ""


def test_back_returns_to_the_run_before_and_restores_its_form(browser, live_server):
    """run() replaced the address: after two runs Back left the page (to /)."""
    page, errors = _page(browser, live_server, DESKTOP)
    page.goto(f"{live_server}/memory")
    page.wait_for_selector('select[name=gpu] option[value="h100-sxm5-80gb"]', state="attached")
    _run(page, _done(page))  # the defaults: micro-batch 1
    first, verdict = page.url, _text(page, "verdict")
    assert "micro_batch=1" in first and verdict == "fits"
    page.fill("input[name=micro_batch]", "4")
    _run(page, _done(page))
    assert "micro_batch=4" in page.url and _text(page, "verdict") == "DOES NOT FIT"
    done = _done(page)
    page.go_back()
    page.wait_for_function(f"document.querySelector('form.plan').getAttribute('data-done') "
                           f"!== {done!r}", timeout=WAIT_MS)
    assert page.url == first
    assert page.input_value("input[name=micro_batch]") == "1"
    assert _text(page, "verdict") == "fits"
    page.go_back()  # the page as first opened: its defaults, no answer
    page.wait_for_function("location.search === ''", timeout=WAIT_MS)
    assert page.url == f"{live_server}/memory"
    assert page.inner_html("#result") == "" and page.is_hidden("#error")
    assert page.input_value("input[name=micro_batch]") == "1"
    assert page.input_value("select[name=gpu]") == "h100-sxm5-80gb"
    assert page.input_value("select[name=model]") == "llama-3.1-8b"
    done = _done(page)
    page.go_forward()
    page.wait_for_function(f"document.querySelector('form.plan').getAttribute('data-done') "
                           f"!== {done!r}", timeout=WAIT_MS)
    assert page.url == first and _text(page, "verdict") == "fits"
    page.close()
    assert not errors


def test_the_same_run_again_adds_no_history_entry(browser, live_server):
    page, errors = _page(browser, live_server, DESKTOP)
    page.goto(f"{live_server}/memory?model=llama-3.1-8b&gpu=h100-sxm5-80gb&num_gpus=8")
    page.wait_for_selector('#result [data-label="verdict"]', timeout=WAIT_MS)
    length = page.evaluate("history.length")
    _run(page, _done(page))
    assert page.evaluate("history.length") == length
    page.close()
    assert not errors
