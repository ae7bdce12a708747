"""What the page shows is what was asked and answered: the model in use (catalog or upload),
no earlier answer left under an error, the values a shared link could not use."""

from __future__ import annotations

import os

import pytest

from tests.web.conftest import CHROMIUM
from tests.web.test_browser import DESKTOP, _page, _text

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"no Chromium at {CHROMIUM}")
WAIT_MS = 10_000  # longer than any answer here needs; the old page never got there


def _mistral_config() -> str:
    from infraplan.catalog import MODELS_DIR, load_catalog

    return str(MODELS_DIR / load_catalog().models.get("mistral-7b").config_file)


def _small_training(page) -> None:
    page.select_option("select[name=gpus]", ["h100-sxm5-80gb"])
    page.fill("input[name=min_count]", "8")
    page.fill("input[name=max_count]", "8")
    page.fill("input[name=tokens]", "1e10")
    page.fill("input[name=global_batch]", "64")


def _step_s(model: str) -> float:
    from infraplan.training.plan_train import plan_training
    from infraplan.workloads import TrainScenario

    return plan_training(TrainScenario.model_validate({
        "model": model, "training": {"tokens": 1e10, "global_batch": 64, "seq_len": 4096},
        "hardware": {"gpus": ["h100-sxm5-80gb"], "min_count": 8, "max_count": 8}})
    ).best[0].step_s


def _open_train(browser, live_server, query=""):
    page, errors = _page(browser, live_server, DESKTOP)
    page.goto(f"{live_server}/train{query}")
    page.wait_for_selector('select[name=gpus] option[value="h100-sxm5-80gb"]', state="attached")
    return page, errors


def test_picking_a_catalog_model_replaces_the_upload(browser, live_server):
    """The upload used to win silently: the plan was the uploaded model's."""
    page, errors = _open_train(browser, live_server)
    page.set_input_files("#config-file", _mistral_config())
    page.wait_for_selector('#inspect [data-label="parameters"]')
    in_use = page.locator("select[name=model] option:checked").inner_text()
    page.select_option("select[name=model]", "llama-3.1-8b")
    _small_training(page)
    page.click("button[type=submit]")
    page.wait_for_selector('#result [data-label="step time"]', timeout=60_000)
    assert _text(page, "step time") == f"{_step_s('llama-3.1-8b'):,.3f} s" != \
        f"{_step_s('mistral-7b'):,.3f} s"
    assert "model=llama-3.1-8b" in page.url
    assert page.eval_on_selector("#config-file", "e => e.files.length") == 0
    assert page.inner_html("#inspect") == ""
    assert in_use == "uploaded: mistral-7b"  # the select named the upload while it was used
    page.close()
    assert not errors


def test_a_failed_upload_drops_the_earlier_one(browser, live_server):
    """A second, broken file kept the first upload; the next run hid the error and planned
    the first file."""
    page, errors = _open_train(browser, live_server)
    posted = []
    page.on("request", lambda r: posted.append(r.url) if "/api/plan/" in r.url else None)
    page.set_input_files("#config-file", _mistral_config())
    page.wait_for_selector('#inspect [data-label="parameters"]')
    page.set_input_files("#config-file", files=[{"name": "broken.json",
                                                 "mimeType": "application/json",
                                                 "buffer": b'{"model_type": '}])
    page.wait_for_selector("#error:not(.hidden)")
    assert page.inner_text("#error").startswith("broken.json: not valid JSON (")
    assert page.inner_html("#inspect") == ""
    _small_training(page)
    page.click("button[type=submit]")
    page.wait_for_selector("#error:not(.hidden)", timeout=WAIT_MS)
    assert page.inner_text("#error").startswith("broken.json: not valid JSON (")
    assert "pick a catalog model" in page.inner_text("#error")
    assert page.inner_html("#result") == "" and not posted
    # a catalog model ends the failed upload
    page.select_option("select[name=model]", "llama-3.1-8b")
    assert page.is_hidden("#error")
    page.click("button[type=submit]")
    page.wait_for_selector('#result [data-label="step time"]', timeout=60_000)
    assert _text(page, "step time") == f"{_step_s('llama-3.1-8b'):,.3f} s"
    page.close()
    assert not errors


def test_a_failed_run_clears_the_earlier_answer(browser, live_server):
    page, errors = _open_train(browser, live_server, "?model=llama-3.1-8b&gpus=h100-sxm5-80gb"
                                                     "&min_count=8&max_count=8&tokens=1e10"
                                                     "&global_batch=64")
    page.wait_for_selector('#result [data-label="step time"]', timeout=60_000)
    page.fill("input[name=min_count]", "64")
    page.click("button[type=submit]")
    page.wait_for_selector("#error:not(.hidden)")
    assert page.inner_html("#result") == ""
    assert page.inner_text("#error").endswith(
        "min_count 64 exceeds max_count 8. To fix: lower min_count to 8 or less, or raise "
        "max_count to 64 or more")
    page.close()
    home, home_errors = _page(browser, live_server, DESKTOP)
    home.goto(f"{live_server}/")
    home.wait_for_selector('select[name=model] option[value="llama-3.1-8b"]', state="attached")
    home.select_option("select[name=model]", "llama-3.1-8b")
    home.click("button[type=submit]")
    home.wait_for_selector('#inspect [data-label="parameters"]')
    home.fill("input[name=seq_len]", "0")
    home.click("button[type=submit]")
    home.wait_for_selector("#error:not(.hidden)")
    assert home.inner_text("#error").startswith("context length (tokens): must be greater "
                                                "than or equal to 1")
    assert home.inner_html("#inspect") == ""
    home.close()
    assert not errors and not home_errors


def test_a_links_unusable_values_are_reported(browser, live_server):
    """A link's bad values used to be replaced by the form's defaults and the plan ran
    anyway. Now each stays in its field, marked with its label and the fix, and nothing
    runs; a name the page has no field for is named in the notice."""
    query = ("?model=llama-3.1-8b&gpus=h999,h100-sxm5-80gb&tokens=abc&min_count=8"
             "&max_count=8.5&global_batch=64&colour=red")
    page, errors = _page(browser, live_server, DESKTOP)
    posted = []
    page.on("request", lambda r: posted.append(r.url) if "/api/plan/" in r.url else None)
    page.goto(f"{live_server}/train{query}")
    page.wait_for_selector("#error:not(.hidden)", timeout=WAIT_MS)
    choices = page.locator("select[name=gpus] option:not([data-link])").count()
    assert choices > 8
    assert page.inner_text("#error") == (
        "tokens to train on: 'abc' is not a number; use e.g. 1e11; accelerators (up to 3): "
        f"'h999' is not one of the {choices} choices; pick one in the list; most GPUs: '8.5' "
        "is not a whole number; use e.g. 64")
    assert page.inner_text("#notice") == (
        "ignored from the link: colour=red (not a field of this page). To fix: correct the "
        "link, or press the button to run without them")
    assert page.input_value("input[name=tokens]") == "abc"  # the link's, not the default
    assert page.input_value("input[name=max_count]") == "8.5"
    assert _beside(page, "max_count") == "most GPUs: '8.5' is not a whole number; use e.g. 64"
    assert not posted and page.inner_html("#result") == "" and page.url.endswith(query)
    page.close()
    serve, serve_errors = _page(browser, live_server, DESKTOP)
    serve.goto(f"{live_server}/serve?mode=bogus")
    serve.wait_for_selector("#error:not(.hidden)", timeout=WAIT_MS)
    assert serve.inner_text("#error") == ("what to do: 'bogus' is not one of plan, simulate; "
                                          "pick one")
    assert serve.input_value("select[name=mode]") == "bogus"
    serve.close()
    assert not errors and not serve_errors


def _config_of(model: str) -> str:
    from infraplan.catalog import MODELS_DIR, load_catalog

    return str(MODELS_DIR / load_catalog().models.get(model).config_file)


def test_the_address_bar_is_the_run_with_an_upload(browser, live_server):
    """After a run of an uploaded config the address bar kept the link's plan (70B on 64
    GPUs) while the page showed 8B on 16 and said 'copy it to share the check'. Now it
    holds the run's fields and the upload's name; opening it asks for the file."""
    page, errors = _page(browser, live_server, DESKTOP)
    page.goto(f"{live_server}/memory?model=llama-3.1-70b&gpu=h100&num_gpus=64&tp=8&zero=1")
    page.wait_for_selector('#result [data-label="verdict"]', timeout=30_000)
    page.set_input_files("#config-file", _config_of("llama-3.1-8b"))
    page.wait_for_selector('#inspect [data-label="parameters"]')
    page.fill("input[name=num_gpus]", "16")
    done = page.get_attribute("form.plan", "data-done")
    page.click("button[type=submit]")
    page.wait_for_function(f"document.querySelector('form.plan').dataset.done !== '{done}'",
                           timeout=30_000)
    checked = _text(page, "memory per accelerator")
    assert _text(page, "accelerators") == "16 x h100-sxm5-80gb"
    assert "num_gpus=16" in page.url and "uploaded=llama-3.1-8b" in page.url
    assert "model=" not in page.url and "num_gpus=64" not in page.url
    assert page.inner_text("#notice").endswith("not the file: whoever opens the link must "
                                               "upload it too")
    shared = page.url
    page.close()
    other, other_errors = _page(browser, live_server, DESKTOP)
    posted = []
    other.on("request", lambda r: posted.append(r.url) if "/api/memory" in r.url else None)
    other.goto(shared)
    other.wait_for_selector("#notice:not(.hidden)", timeout=WAIT_MS)
    assert other.inner_text("#notice").startswith(
        "this link was made with an uploaded config.json (llama-3.1-8b), which a link cannot "
        "carry. To fix: upload that config.json")
    assert other.locator("select[name=model] option:checked").inner_text() == \
        "upload llama-3.1-8b again"
    assert other.input_value("input[name=num_gpus]") == "16" and not posted
    other.click("button[type=submit]")  # not the catalog default in the file's place
    other.wait_for_selector("#error:not(.hidden)")
    assert other.inner_text("#error").startswith("this link was made with an uploaded")
    assert not posted and other.inner_html("#result") == ""
    other.set_input_files("#config-file", _config_of("llama-3.1-8b"))
    other.wait_for_selector('#inspect [data-label="parameters"]')
    other.click("button[type=submit]")
    other.wait_for_selector('#result [data-label="verdict"]', timeout=30_000)
    assert _text(other, "memory per accelerator") == checked
    other.close()
    assert not errors and not other_errors


def _beside(page, name: str) -> str:
    """The message beside a field ('' when there is none)."""
    note = page.locator(f"label:has([name={name}]) .field-error")
    return note.inner_text() if note.count() else ""


def test_an_emptied_field_is_named_not_replaced(browser, live_server):
    """Clearing 'accelerators in the job' (8) ran the check on 1 GPU, the API's default:
    'DOES NOT FIT 139.0 GiB', no word. An emptied field the form filled is now named, beside
    it and in the error box, and nothing runs; an SLO may be emptied (none)."""
    page, errors = _page(browser, live_server, DESKTOP)
    posted = []
    page.on("request", lambda r: posted.append(r.url) if "/api/memory" in r.url else None)
    page.goto(f"{live_server}/memory")
    page.wait_for_selector('select[name=gpu] option[value="h100-sxm5-80gb"]', state="attached")
    page.fill("input[name=num_gpus]", "")
    page.click("button[type=submit]")
    page.wait_for_selector("#error:not(.hidden)", timeout=WAIT_MS)
    message = "empty; enter a value (the form's default is 8)"
    assert page.inner_text("#error") == f"accelerators in the job (num_gpus): {message}"
    assert _beside(page, "num_gpus") == message and _beside(page, "tp") == ""
    assert not posted and page.inner_html("#result") == ""
    page.fill("input[name=num_gpus]", "8")
    page.click("button[type=submit]")
    page.wait_for_selector('#result [data-label="verdict"]', timeout=30_000)
    assert _text(page, "accelerators") == "8 x h100-sxm5-80gb" and _beside(page, "num_gpus") == ""
    page.close()
    train, train_errors = _open_train(browser, live_server)
    train.select_option("select[name=gpus]", [])
    train.click("button[type=submit]")
    train.wait_for_selector("#error:not(.hidden)", timeout=WAIT_MS)
    assert train.inner_text("#error") == ("accelerators (up to 3) (gpus): none picked; pick at "
                                          "least one")
    train.close()
    serve, serve_errors = _page(browser, live_server, DESKTOP)
    serve.goto(f"{live_server}/serve")
    serve.wait_for_selector('select[name=gpus] option[value="h100-sxm5-80gb"]', state="attached")
    assert serve.get_attribute("input[name=ttft_p99_s]", "placeholder") == "none"
    serve.close()
    assert not errors and not train_errors and not serve_errors


def test_the_apis_message_is_beside_its_field(browser, live_server):
    page, errors = _page(browser, live_server, DESKTOP)
    page.goto(f"{live_server}/memory?model=llama-3.1-8b&gpu=h100-sxm5-80gb&num_gpus=3&tp=3")
    page.wait_for_selector("#error:not(.hidden)", timeout=30_000)
    assert _beside(page, "tp").startswith("tp=3 does not divide the 32 attention heads")
    assert _beside(page, "num_gpus") == ""
    page.fill("input[name=tp]", "1")
    page.click("button[type=submit]")
    page.wait_for_selector('#result [data-label="verdict"]', timeout=30_000)
    assert _beside(page, "tp") == ""
    page.goto(f"{live_server}/?model=llama-3.1-8b&seq_len=0")
    page.wait_for_selector("#error:not(.hidden)", timeout=WAIT_MS)
    assert _beside(page, "seq_len").startswith("context length (tokens): must be greater than "
                                               "or equal")
    page.close()
    assert not errors
