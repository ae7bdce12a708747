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


# each results table on a phone: its width, its box's, the box's overflow, and each word of
# its cells that the browser broke over two lines (a token cut: 'configuratio / n')
TABLES = """() => Array.from(document.querySelectorAll('#result table'), t => {
  const box = t.closest('.table-wrap');
  const broken = [];
  t.querySelectorAll('th, td').forEach(cell => {
    const walk = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    while (walk.nextNode()) {
      const node = walk.currentNode, word = /\\S+/g;
      let m;
      while ((m = word.exec(node.data))) {
        const r = document.createRange();
        r.setStart(node, m.index);
        r.setEnd(node, m.index + m[0].length);
        const lines = new Set(Array.from(r.getClientRects(), x => Math.round(x.top)));
        if (lines.size > 1) { broken.push(m[0]); }
      }
    }
  });
  return {caption: t.caption.textContent, width: t.getBoundingClientRect().width,
          shown: box.clientWidth, scrolls: box.scrollWidth, overflow:
          getComputedStyle(box).overflowX, broken: broken};
})"""


@pytest.mark.parametrize("path, ready, wide", [
    ("/train?model=llama-3.1-8b&gpus=h100-sxm5-80gb&min_count=8&max_count=64",
     '#result [data-label="step time"]', "best plans"),
    ("/serve?mode=plan&model=llama-3.1-8b&num_requests=300", "#fig-load_sweep .main-svg",
     "configurations that meet the SLOs, cheapest first"),
], ids=["train", "serve-plan"])
def test_a_phone_scrolls_wide_tables_and_breaks_no_token(browser, live_server, path, ready,
                                                        wide):
    """At 390 px the tables were squeezed into the screen: 'configuratio / n',
    'recompute=n / one', 'h100-sxm5- / 80gb', the cost column cut."""
    page, errors = _page(browser, live_server, PHONE)
    page.goto(live_server + path)
    page.wait_for_selector(ready, timeout=120_000)
    tables = page.evaluate(TABLES)
    assert tables and [(t["caption"], t["broken"]) for t in tables if t["broken"]] == []
    for t in tables:  # a table wider than its box scrolls inside it
        assert t["overflow"] == "auto" and t["scrolls"] >= t["width"] - 1, t
    widest = next(t for t in tables if t["caption"] == wide)
    assert widest["width"] > widest["shown"], widest  # whole columns, scrolled to
    assert page.evaluate("document.scrollingElement.scrollWidth") == PHONE["width"]
    page.close()
    assert not errors
