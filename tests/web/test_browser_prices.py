"""The price inputs in a real browser: a price typed in the training form is the cost line's
price, and the link keeps it; a bad price is marked beside its field and nothing runs, typed
or from a shared link. Before, the forms had no price field: the cost line was the cheapest
catalog offer's."""

from __future__ import annotations

import os
from urllib.parse import parse_qs, urlparse

import pytest

from tests.web.conftest import CHROMIUM
from tests.web.test_browser import DESKTOP, _page, _text
from tests.web.test_browser_input import _posts
from tests.web.test_browser_state import _beside

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"no Chromium at {CHROMIUM}")
WAIT_MS = 10_000
LABEL = "price ($ per GPU-hour)"
TRAIN = "/train?model=llama-3.1-8b&gpus=h100-sxm5-80gb&min_count=8&max_count=16&tokens=1e10"


def _cost_line(page) -> str:
    return page.locator("#result tr", has_text="GPU-h x").first.inner_text()


def test_a_typed_price_is_the_cost_lines_price_and_the_link_keeps_it(browser, live_server):
    from infraplan.training.plan_train import plan_training
    from infraplan.workloads import TrainScenario

    page, errors = _page(browser, live_server, DESKTOP)
    page.goto(f"{live_server}{TRAIN}")
    page.wait_for_selector('#result [data-label="cost"]', timeout=60_000)
    assert "cheapest on-demand offer" in _cost_line(page)  # no price given: the catalog's
    page.fill("input[name=prices]", "h100=2.74")
    page.select_option("select[name=pricing]", "spot")
    page.click("button[type=submit]")
    page.wait_for_function("document.querySelector('#result').innerText"
                           ".includes('x $2.74/GPU-h')", timeout=60_000)
    best = plan_training(TrainScenario.model_validate({
        "model": "llama-3.1-8b", "training": {"tokens": 1e10, "global_batch": 256,
                                               "seq_len": 4096},
        "hardware": {"gpus": ["h100-sxm5-80gb"], "min_count": 8, "max_count": 16},
        "prices": {"h100-sxm5-80gb": 2.74}, "pricing": "spot"})).best[0]
    want = f"${best.gpu_hours * 2.74:,.2f}"  # to the cent
    assert _text(page, "cost") == want
    line = _cost_line(page)
    assert line.startswith(f"compute (spot)\t{want}\t{best.gpu_hours:,.6g} GPU-h x $2.74/GPU-h "
                           "(your price (prices), per GPU used")
    assert "cheapest" not in line
    query = parse_qs(urlparse(page.url).query)
    assert query["prices"] == ["h100=2.74"] and query["pricing"] == ["spot"]
    shared, shared_errors = _page(browser, live_server, DESKTOP)  # the link, opened anew
    shared.goto(page.url)
    shared.wait_for_selector('#result [data-label="cost"]', timeout=60_000)
    assert shared.input_value("input[name=prices]") == "h100=2.74"
    assert shared.input_value("select[name=pricing]") == "spot"
    assert _text(shared, "cost") == want
    page.close()
    shared.close()
    assert not errors and not shared_errors


def test_a_bad_price_is_marked_beside_its_field_and_nothing_runs(browser, live_server):
    page, errors = _page(browser, live_server, DESKTOP)
    posted = _posts(page)
    link = f"{live_server}{TRAIN}&prices=a100%3D1.6"  # a price for an accelerator not chosen
    page.goto(link)
    page.wait_for_selector("#error:not(.hidden)", timeout=WAIT_MS)
    message = (f"{LABEL}: 'a100=1.6': a100-sxm4-80gb is not among the accelerators chosen "
               "(h100-sxm5-80gb). To fix: pick a100-sxm4-80gb in the accelerators too, or "
               "drop its price")
    assert page.inner_text("#error") == message == _beside(page, "prices")
    assert page.input_value("input[name=prices]") == "a100=1.6"
    assert not posted and page.url == link and page.inner_html("#result") == ""
    for typed, why in [
            ("h100=0", "'h100=0': a price is above $0 and at most $1,000 per GPU-hour. To "
                       "fix: give the USD you pay per GPU-hour, e.g. 2.50"),
            ("h10O=2", "'h10O=2': unknown accelerator 'h10O'; did you mean 'h100-sxm5-80gb'? "
                       "To fix: name an accelerator of the list (or its alias)"),
            ("h100 2.5", "'h100 2.5' is not a price or a name=price pair. To fix: give USD per "
                         "GPU-hour, one number for every accelerator (2.50) or name=price "
                         "pairs (h100=2.50, a100=1.60)")]:
        page.fill("input[name=prices]", typed)
        page.click("button[type=submit]")
        assert page.inner_text("#error") == f"{LABEL}: {why}" == _beside(page, "prices")
        assert page.locator("label.invalid input[name=prices]").count() == 1
    assert not posted
    page.fill("input[name=prices]", "2.5")  # the fix: one price for every accelerator
    page.click("button[type=submit]")
    page.wait_for_function("document.querySelector('#result').innerText"
                           ".includes('x $2.50/GPU-h')", timeout=60_000)
    assert _beside(page, "prices") == "" and "prices=2.5" in page.url
    page.close()
    assert not errors


@pytest.mark.parametrize("mode, chosen", [
    ("plan&gpus=h100-sxm5-80gb,l40s", "h100-sxm5-80gb, l40s"),
    ("simulate&gpu=h100-sxm5-80gb", "h100-sxm5-80gb")], ids=["plan", "simulate"])
def test_the_serving_forms_price_is_checked_against_its_modes_accelerators(
        browser, live_server, mode, chosen):
    page, errors = _page(browser, live_server, DESKTOP)
    posted = _posts(page)
    page.goto(f"{live_server}/serve?mode={mode}&pricing=reserved-1y&prices=a100%3D1.6")
    page.wait_for_selector("#error:not(.hidden)", timeout=WAIT_MS)
    assert _beside(page, "prices") == (
        f"{LABEL}: 'a100=1.6': a100-sxm4-80gb is not among the accelerators chosen ({chosen})."
        " To fix: pick a100-sxm4-80gb in the accelerators too, or drop its price")
    assert page.input_value("select[name=pricing]") == "reserved-1y" and not posted
    page.close()
    assert not errors
