"""What a reader can see: every table column within its box on a desktop (a phone scrolls
the table inside its box, never the page), legible figures, charts that fit a phone."""

from __future__ import annotations

import os

import pytest

from tests.web.conftest import ARTIFACTS, CHROMIUM
from tests.web.test_browser import PHONE, _page

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"no Chromium at {CHROMIUM}")
TRAIN_DEFAULTS = "/train?model=llama-3.1-8b&gpus=h100-sxm5-80gb&min_count=8&max_count=64"
# each table box: its caption, the width it shows, the width its table needs, its overflow
BOXES = """Array.from(document.querySelectorAll('.table-wrap'), w => ({
  caption: w.querySelector('caption').textContent, shown: w.clientWidth,
  needed: w.scrollWidth, overflow: getComputedStyle(w).overflowX}))"""


def _clipped(page) -> list[dict]:
    boxes = page.evaluate(BOXES)
    assert boxes, "the page has tables"
    return [b for b in boxes if b["needed"] > b["shown"]]


@pytest.fixture(scope="module")
def train_page_doc(client):
    answer = client.post("/api/plan/train", json={"model": "llama-3.1-8b",
                                                  "gpus": ["h100-sxm5-80gb"],
                                                  "min_count": 8, "max_count": 64})
    assert answer.status_code == 200, answer.text
    return answer.json()["document"]


@pytest.mark.parametrize("width", [1280, 1920])
def test_no_table_is_clipped_on_a_desktop(browser, live_server, train_page_doc, tmp_path,
                                          width):
    """At 1280 and 1920 px 'best plans' needed 1,198 px of a 1,146 px column (its 'memory
    GiB' hidden) and 'cost line items' 1,553 px: the long text cells (a plan, a cost's
    basis) now wrap. The report has the same tables and style sheet."""
    from infraplan.report.html import render_document

    page, errors = _page(browser, live_server, {"width": width, "height": 900})
    page.goto(live_server + TRAIN_DEFAULTS)
    page.wait_for_selector('#result [data-label="step time"]', timeout=60_000)
    captions = [b["caption"] for b in page.evaluate(BOXES)]
    assert "best plans" in captions and "cost line items" in captions
    assert _clipped(page) == []
    report = tmp_path / "report.html"
    report.write_text(render_document(train_page_doc), encoding="utf-8")
    page.goto(report.as_uri())
    assert _clipped(page) == []
    page.close()
    assert not [e for e in errors if not e.startswith("external request file://")]


def test_a_phone_scrolls_a_wide_table_in_its_box(browser, live_server):
    page, errors = _page(browser, live_server, PHONE)
    page.goto(live_server + TRAIN_DEFAULTS)
    page.wait_for_selector('#result [data-label="step time"]', timeout=60_000)
    wide = _clipped(page)
    assert wide and all(b["overflow"] == "auto" for b in wide)
    assert page.evaluate("document.scrollingElement.scrollWidth") == PHONE["width"]
    page.screenshot(path=str(ARTIFACTS / "train-phone-tables.png"), full_page=True)
    page.close()
    assert not errors


def _texts(page, figure: str) -> list[tuple[str, float]]:
    """Each text drawn in a figure and its font size in px."""
    return [(t, float(px.removesuffix("px"))) for t, px in page.eval_on_selector(
        figure, "g => Array.from(g.querySelectorAll('.main-svg text'), "
                "t => [t.textContent, getComputedStyle(t).fontSize])")]


def test_the_cost_chart_is_legible(browser, live_server):
    """The bar carried its basis sentence, drawn about 5 px tall inside it, and no dollars.
    Now: the dollars on the bar, every text at 11 px or more; the basis is the table's."""
    page, errors = _page(browser, live_server, PHONE)
    page.goto(live_server + TRAIN_DEFAULTS)
    page.wait_for_selector("#fig-cost .main-svg .bartext", timeout=60_000)
    rows = page.locator('#result table:has(caption:text-is("cost line items")) tbody tr')
    items = [rows.nth(n).locator("td").all_inner_texts() for n in range(rows.count())]
    assert items and "GPU-h" in items[0][2]  # the basis, in the table
    texts = _texts(page, "#fig-cost")
    dollars = [usd for _, usd, _ in items]  # whole dollars from $1,000 in both
    assert dollars == ["$9,040"]
    assert [t for t, _ in texts if t.startswith("$") and t in dollars] == dollars
    assert not [t for t, _ in texts if "GPU-h" in t]  # the basis is not drawn
    assert min(size for _, size in texts) >= 11, texts
    page.locator("#fig-cost").screenshot(path=str(ARTIFACTS / "cost-phone.png"))
    page.close()
    assert not errors


def test_the_serving_memory_chart_fits_a_phone(browser, live_server):
    """At 390 px the labels ('1 x 1 x h100-sxm5-80gb, vllm, weights bf16, KV bf16') were cut
    at the left and the bars had 15% of the chart; the labels now wrap."""
    page, errors = _page(browser, live_server, PHONE)
    posted = []
    page.on("response", lambda r: posted.append(r) if "/api/plan/serve" in r.url else None)
    page.goto(f"{live_server}/serve?mode=plan&model=llama-3.1-8b")
    page.wait_for_selector("#fig-memory .main-svg .ytick", timeout=120_000)
    bars = [t for t in posted[0].json()["document"]["figures"]["memory"]["data"]
            if t.get("orientation") == "h"][0]["y"]
    shown = page.eval_on_selector("#fig-memory", """g => {
      const box = r => { const b = r.getBoundingClientRect(); return [b.left, b.width]; };
      return {figure: box(g), plot: box(g.querySelector('.nsewdrag')),
              labels: Array.from(g.querySelectorAll('.ytick text'), t => ({box: box(t),
                text: Array.from(t.querySelectorAll('tspan.line'), l => l.textContent)}))};
    }""")
    left, width = shown["figure"]
    assert shown["plot"][1] >= 0.5 * width, shown
    assert [" ".join(label["text"]) for label in shown["labels"]] == bars
    assert all(label["box"][0] >= left for label in shown["labels"]), shown
    assert max(len(line) for label in shown["labels"] for line in label["text"]) <= 16
    page.locator("#fig-memory").screenshot(path=str(ARTIFACTS / "serve-memory-phone.png"))
    page.close()
    assert not errors


def test_log_axes_label_their_ticks_once(browser, live_server):
    """The goodput chart's log axis read '4 5 6 7 8 9 1 2 3 4 5 6 7 8 9 10 2 ...' in small
    digits: each label now names its value, at 1, 2 or 5 times a power of ten."""
    page, errors = _page(browser, live_server, {"width": 1280, "height": 900})
    page.goto(live_server + TRAIN_DEFAULTS)
    page.wait_for_selector("#fig-goodput .main-svg .xtick", timeout=60_000)
    labels = page.eval_on_selector("#fig-goodput", "g => Array.from(g.querySelectorAll("
                                   "'.xtick text'), t => [t.textContent, "
                                   "getComputedStyle(t).fontSize])")
    values = [float(text) for text, _ in labels]
    assert len(values) >= 2 and len(set(values)) == len(values), labels
    assert all(f"{v:.0e}"[0] in "125" for v in values), labels
    assert all(float(size.removesuffix("px")) >= 11 for _, size in labels), labels
    page.close()
    assert not errors


@pytest.mark.parametrize("lo,hi,ticks", [(0.4, 300, ["1", "10", "100"]),
                                         (0.01, 30, ["0.01", "0.1", "1", "10"]),
                                         (0.03, 0.4, ["0.05", "0.1", "0.2"]),
                                         (2.1, 4.9, None)])
def test_log_ticks(lo, hi, ticks):
    from infraplan.report.figures import log_ticks

    assert log_ticks(lo, hi).get("ticktext") == ticks
