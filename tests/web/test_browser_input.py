"""Bad input on the pages, as a first-time user meets it: a shared link's typo stays in its
field (marked, with the closest choice) and nothing runs; the server's messages name the
form's labels; a phone shows the latency table's SLO columns."""

from __future__ import annotations

import os

import pytest

from tests.web.conftest import ARTIFACTS, CHROMIUM
from tests.web.test_browser import DESKTOP, PHONE, _page, _text
from tests.web.test_browser_state import _beside

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"no Chromium at {CHROMIUM}")
WAIT_MS = 10_000
SIMULATE = "/serve?mode=simulate&gpu=h100-sxm5-80gb&num_requests=200"


def _posts(page) -> list[str]:
    posted: list[str] = []
    page.on("request", lambda r: posted.append(r.url) if r.method == "POST" else None)
    return posted


def test_a_links_typo_in_the_model_is_marked_not_replaced(browser, live_server):
    """The page simulated llama-3.1-8b for model=llama-3.1-8bb, put 8b in the address bar
    and said so only in a notice listing the first 8 catalog names."""
    page, errors = _page(browser, live_server, DESKTOP)
    posted = _posts(page)
    link = f"{live_server}{SIMULATE}&model=llama-3.1-8bb"
    page.goto(link)
    page.wait_for_selector("#error:not(.hidden)", timeout=WAIT_MS)
    message = ("model (catalog): 'llama-3.1-8bb' is not one of the choices; did you mean "
               "'llama-3.1-8b'? To fix: pick it, or another, in the list")
    assert page.inner_text("#error") == message == _beside(page, "model")
    assert page.input_value("select[name=model]") == "llama-3.1-8bb"
    assert page.locator("label.invalid select[name=model]").count() == 1
    assert not posted and page.url == link and page.inner_html("#result") == ""
    assert page.inner_text("#notice") == ""
    page.select_option("select[name=model]", "llama-3.1-8b")  # the fix, then a run
    page.click("button[type=submit]")
    page.wait_for_selector('#result [data-label="p99 time to first token"]', timeout=60_000)
    assert "model=llama-3.1-8b&" in page.url and _beside(page, "model") == ""
    assert page.locator("select[name=model] option[value='llama-3.1-8bb']").count() == 0
    page.close()
    memory, memory_errors = _page(browser, live_server, DESKTOP)
    memory.goto(f"{live_server}/memory?model=llama-3.1-8b&gpu=h10O")
    memory.wait_for_selector("#error:not(.hidden)", timeout=WAIT_MS)
    assert memory.inner_text("#error") == (
        "accelerator: 'h10O' is not one of the choices; did you mean 'h100-sxm5-80gb'? To "
        "fix: pick it, or another, in the list")
    memory.close()
    assert not errors and not memory_errors


def test_a_list_fields_bad_item_is_named_with_its_label(browser, live_server):
    """tps=1,x in a link planned with the default 1,2; typed in the form it sent null and
    came back as 'tp.1: must be a JSON number, got null'."""
    page, errors = _page(browser, live_server, DESKTOP)
    posted = _posts(page)
    page.goto(f"{live_server}/serve?mode=plan&model=llama-3.1-8b&tps=1,x")
    page.wait_for_selector("#error:not(.hidden)", timeout=WAIT_MS)
    message = "tensor-parallel sizes (e.g. 1,2): 'x' is not a whole number; use e.g. 1,2,4"
    assert page.inner_text("#error") == message == _beside(page, "tps")
    assert page.input_value("input[name=tps]") == "1,x" and not posted
    page.fill("input[name=tps]", "1, 2.5")
    page.click("button[type=submit]")
    page.wait_for_selector("#error:not(.hidden)", timeout=WAIT_MS)
    assert page.inner_text("#error") == ("tensor-parallel sizes (e.g. 1,2): '2.5' is not a "
                                         "whole number; use e.g. 1,2,4")
    assert not posted
    page.close()
    memory, memory_errors = _page(browser, live_server, DESKTOP)
    memory.goto(f"{live_server}/memory?model=llama-3.1-8b&gpu=h100-sxm5-80gb")
    memory.wait_for_selector('#result [data-label="verdict"]', timeout=30_000)
    memory.fill("input[name=lora_targets]", "q_proj,,v_proj")
    memory.click("button[type=submit]")
    memory.wait_for_selector("#error:not(.hidden)", timeout=WAIT_MS)
    assert memory.inner_text("#error") == ("LoRA targets: 'q_proj,,v_proj' has an empty item; "
                                           "separate names with one comma, e.g. all-linear")
    memory.close()
    assert not errors and not memory_errors


def test_the_servers_message_names_the_forms_label(browser, live_server):
    """'traffic.rate_per_s: Input should be greater than 0 (got -5)' named the API's path."""
    page, errors = _page(browser, live_server, DESKTOP)
    page.goto(f"{live_server}/serve?mode=plan&model=llama-3.1-8b&rate_per_s=-5")
    page.wait_for_selector("#error:not(.hidden)", timeout=30_000)
    message = "rate (requests/s): must be greater than 0 (got -5)"
    assert page.inner_text("#error") == message == _beside(page, "rate_per_s")
    page.fill("input[name=rate_per_s]", "10")
    page.fill("input[name=tps]", "1,3")  # an item the API refuses: 'tp.1: ...'
    page.click("button[type=submit]")
    page.wait_for_selector("#error:not(.hidden)", timeout=30_000)
    message = "tensor-parallel sizes (e.g. 1,2): must be 1, 2, 4 or 8 (got 3)"
    assert page.inner_text("#error") == message == _beside(page, "tps")
    page.close()
    assert not errors


@pytest.mark.parametrize("viewport", [PHONE, {"width": 1280, "height": 900}],
                         ids=["390px", "1280px"])
def test_the_latency_tables_slo_columns_are_in_view(browser, live_server, viewport):
    """At 390 px the latency table showed mean and p50; p90 and p99 (the SLO columns) were
    past the edge, and the cost table's basis was cut off."""
    page, errors = _page(browser, live_server, viewport)
    page.goto(f"{live_server}{SIMULATE}&model=llama-3.1-8b")
    page.wait_for_selector('#result [data-label="p99 time to first token"]', timeout=60_000)
    latency = page.locator("#result table", has=page.locator("caption", has_text="latency"))
    latency.scroll_into_view_if_needed()
    p99 = latency.locator("th", has_text="p99").bounding_box()
    assert p99["x"] >= 0 and p99["x"] + p99["width"] <= viewport["width"], p99
    for table in ("latency", "cost line items"):  # nothing past a table's frame
        wide = page.locator(".table-wrap", has=page.locator("caption", has_text=table))
        assert wide.evaluate("e => e.scrollWidth <= e.clientWidth"), table
    # a table that still scrolls (the load sweep) keeps its caption whole in view
    rights = page.eval_on_selector_all("#result caption", "cs => cs.map(c => "
                                       "c.getBoundingClientRect().right)")
    assert len(rights) >= 3 and max(rights) <= viewport["width"], rights
    ARTIFACTS.mkdir(exist_ok=True)
    latency.screenshot(path=str(ARTIFACTS / f"latency-{viewport['width']}.png"))
    assert _text(page, "p99 time to first token").endswith("ms")
    page.close()
    assert not errors
