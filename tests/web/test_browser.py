"""The pages in a real browser (Debian's Chromium through Playwright): fill a form, get a
plan, check the numbers on the page against the library, reload the shared URL on a phone.
Screenshots land in tests/web/artifacts/ (git-ignored)."""

from __future__ import annotations

import json
import os

import pytest

from tests.web.conftest import ARTIFACTS, CHROMIUM

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM),
                                reason=f"no Chromium at {CHROMIUM} (apt-get install -y "
                                       "chromium)")
DESKTOP = {"width": 1366, "height": 900}
PHONE = {"width": 390, "height": 844}


def _page(browser, live_server, viewport):
    page = browser.new_page(viewport=viewport)
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    # every request goes to the test server: nothing from a CDN
    page.on("request", lambda r: errors.append(f"external request {r.url}")
            if not r.url.startswith((live_server, "data:", "blob:")) else None)
    return page, errors


def _text(page, label: str) -> str:
    return page.locator(f'#result [data-label="{label}"] dd').first.inner_text()


def test_training_form(browser, live_server):
    from infraplan.training.plan_train import plan_training
    from infraplan.workloads import TrainScenario

    page, errors = _page(browser, live_server, DESKTOP)
    page.goto(f"{live_server}/train")
    page.wait_for_selector('select[name=model] option[value="llama-3.1-8b"]', state="attached")
    page.select_option("select[name=model]", "llama-3.1-8b")
    page.select_option("select[name=gpus]", ["h100-sxm5-80gb", "a100-sxm4-80gb"])
    page.fill("input[name=min_count]", "8")
    page.fill("input[name=max_count]", "16")
    page.fill("input[name=tokens]", "1e11")
    page.fill("input[name=global_batch]", "128")
    page.select_option("select[name=storage]", "fsx-lustre-p2-125")
    page.click("button[type=submit]")
    page.wait_for_selector('#result [data-label="step time"]', timeout=60_000)
    page.wait_for_selector("#fig-step_breakdown .main-svg")
    result = plan_training(TrainScenario.model_validate({
        "model": "llama-3.1-8b", "training": {"tokens": 1e11, "global_batch": 128,
                                               "seq_len": 4096,
                                               "storage": "fsx-lustre-p2-125"},
        "hardware": {"gpus": ["h100-sxm5-80gb", "a100-sxm4-80gb"], "min_count": 8,
                     "max_count": 16}}))
    best = result.best[0]
    assert _text(page, "step time") == f"{best.step_s:,.3f} s"
    assert _text(page, "MFU") == f"{best.mfu:.1%}"
    assert _text(page, "GPU-hours") == f"{best.gpu_hours:,.0f}"
    assert _text(page, "accelerators") == f"{best.plan.num_gpus:,} x {best.accelerator}"
    assert "max_count=16" in page.url and "gpus=h100-sxm5-80gb%2Ca100-sxm4-80gb" in page.url
    page.screenshot(path=str(ARTIFACTS / "train-desktop.png"), full_page=True)
    shared = page.url
    page.close()
    phone, phone_errors = _page(browser, live_server, PHONE)
    phone.goto(shared)  # the link alone re-runs the plan
    phone.wait_for_selector('#result [data-label="step time"]', timeout=60_000)
    assert _text(phone, "step time") == f"{best.step_s:,.3f} s"
    phone.wait_for_selector("#fig-memory .main-svg")
    phone.screenshot(path=str(ARTIFACTS / "train-phone.png"), full_page=True)
    phone.close()
    assert not errors and not phone_errors, errors + phone_errors


def test_serving_form(browser, live_server):
    from infraplan.serving.run import simulate_scenario
    from infraplan.serving.scenario import ServeScenario

    page, errors = _page(browser, live_server, DESKTOP)
    page.goto(f"{live_server}/serve")
    page.wait_for_selector('select[name=gpu] option[value="h100-sxm5-80gb"]', state="attached")
    page.select_option("select[name=mode]", "simulate")
    page.select_option("select[name=model]", "llama-3.1-8b")
    page.select_option("select[name=gpu]", "h100-sxm5-80gb")
    page.fill("input[name=replicas]", "2")
    page.select_option("select[name=weight_dtype]", "fp8")
    page.fill("input[name=rate_per_s]", "12")
    page.fill("input[name=num_requests]", "600")
    page.click("button[type=submit]")
    page.wait_for_selector('#result [data-label="p99 time to first token"]', timeout=60_000)
    page.wait_for_selector("#fig-latency_cdf .main-svg")
    page.wait_for_selector("#fig-load_sweep .y2tick")
    # the load sweep's log latency axis reads in decades; synced to the throughput axis
    # under it, its labels were single digits ('5', '4', '3', '2' for 0.05 s ... 25 s)
    labels = page.eval_on_selector("#fig-load_sweep", "gd => Array.from("
                                   "gd.querySelectorAll('.y2tick text'), t => t.textContent)")
    assert {"0.1", "1"} <= set(labels), labels
    summary = simulate_scenario(ServeScenario.model_validate({
        "model": "llama-3.1-8b", "slo": {"ttft_p99_s": 1.0, "tpot_p99_s": 0.05},
        "traffic": {"arrival": {"kind": "poisson", "rate_per_s": 12}, "num_requests": 600,
                    "input": {"kind": "lognormal", "mean": 1000, "sigma": 0.8},
                    "output": {"kind": "lognormal", "mean": 250, "sigma": 0.8}},
        "deployment": {"gpu": "h100-sxm5-80gb", "replicas": 2, "weight_dtype": "fp8"}}))[
        "summary"]
    assert _text(page, "p99 time to first token") == f"{summary['ttft_s']['p99'] * 1e3:,.1f} ms"
    assert _text(page, "p99 time per output token") == \
        f"{summary['tpot_s']['p99'] * 1e3:,.1f} ms"
    assert _text(page, "throughput") == \
        f"{summary['throughput']['requests_per_s']:,.2f} requests/s"
    assert "mode=simulate" in page.url
    page.screenshot(path=str(ARTIFACTS / "serve-desktop.png"), full_page=True)
    shared = page.url
    page.close()
    phone, phone_errors = _page(browser, live_server, PHONE)
    phone.goto(shared)
    phone.wait_for_selector('#result [data-label="p99 time to first token"]', timeout=60_000)
    assert _text(phone, "p99 time to first token") == \
        f"{summary['ttft_s']['p99'] * 1e3:,.1f} ms"
    phone.wait_for_selector("#fig-load_sweep .main-svg")
    phone.screenshot(path=str(ARTIFACTS / "serve-phone.png"), full_page=True)
    phone.close()
    assert not errors and not phone_errors, errors + phone_errors


def test_serving_form_traffic_knobs(browser, live_server):
    """Burstiness, length caps and the seed reach the simulation: the page shows what the
    library gives for the same traffic and seed (a different seed gives other requests)."""
    from infraplan.serving.run import simulate_scenario
    from infraplan.serving.scenario import ServeScenario

    page, errors = _page(browser, live_server, PHONE)
    page.goto(f"{live_server}/serve?mode=simulate&model=llama-3.1-8b&gpu=h100-sxm5-80gb"
              "&arrival=gamma&cv=3&rate_per_s=8&num_requests=400&input_max_tokens=2000"
              "&output_max_tokens=400&seed=5")
    page.wait_for_selector('#result [data-label="p99 time to first token"]', timeout=60_000)
    assert [page.input_value(f"[name={n}]") for n in ("cv", "input_max_tokens", "seed")] == \
        ["3", "2000", "5"]

    def p99_ttft_ms(seed: int) -> str:
        summary = simulate_scenario(ServeScenario.model_validate({
            "model": "llama-3.1-8b", "seed": seed,
            "slo": {"ttft_p99_s": 1.0, "tpot_p99_s": 0.05},
            "traffic": {"arrival": {"kind": "gamma", "rate_per_s": 8, "cv": 3},
                        "num_requests": 400,
                        "input": {"kind": "lognormal", "mean": 1000, "sigma": 0.8,
                                  "max": 2000},
                        "output": {"kind": "lognormal", "mean": 250, "sigma": 0.8,
                                   "max": 400}},
            "deployment": {"gpu": "h100-sxm5-80gb"}}))["summary"]
        return f"{summary['ttft_s']['p99'] * 1e3:,.1f} ms"

    assert _text(page, "p99 time to first token") == p99_ttft_ms(5) != p99_ttft_ms(0)
    page.close()
    assert not errors


def test_bad_input_shows_the_reason(browser, live_server):
    page, errors = _page(browser, live_server, PHONE)
    page.goto(f"{live_server}/train?model=llama-3.1-8b&gpus=h100-sxm5-80gb&min_count=64"
              "&max_count=8")
    page.wait_for_selector("#error:not(.hidden)")
    assert "min_count" in page.inner_text("#error")
    page.close()
    assert not errors


def test_upload_config(browser, live_server, tmp_path):
    from infraplan.catalog import MODELS_DIR, load_catalog
    from infraplan.models import load_model, param_counts

    page, errors = _page(browser, live_server, DESKTOP)
    page.goto(f"{live_server}/")
    entry = load_catalog().models.get("qwen3-30b-a3b")
    page.set_input_files("#config-file", str(MODELS_DIR / entry.config_file))
    page.wait_for_selector('#inspect [data-label="parameters"]')
    counts = param_counts(load_model("qwen3-30b-a3b"))
    text = page.locator('#inspect [data-label="parameters"] dd').inner_text()
    assert text.startswith(f"{counts.total:,}") and f"{counts.active:,} active" in text
    page.screenshot(path=str(ARTIFACTS / "home-desktop.png"), full_page=True)
    page.close()
    assert not errors


def test_an_uploaded_multimodal_config_names_its_uncounted_tower(browser, live_server,
                                                                 tmp_path):
    """The inspect box showed the language model's counts and nothing of the vision tower."""
    from tests.cli.test_cli import LLAVA

    config = tmp_path / "config.json"
    config.write_text(json.dumps(LLAVA))
    page, errors = _page(browser, live_server, DESKTOP)
    page.goto(f"{live_server}/")
    page.set_input_files("#config-file", str(config))
    page.wait_for_selector('#inspect [data-label="note"]')
    note = page.locator('#inspect [data-label="note"] dd').inner_text()
    assert note.startswith("the vision tower (clip_vision_model, 24 layers, hidden 1024;")
    page.close()
    assert not errors


def test_training_with_an_uploaded_config(browser, live_server):
    """A config.json uploaded on the training page is planned in memory, as the library
    plans the same architecture."""
    from infraplan.catalog import MODELS_DIR, load_catalog
    from infraplan.models import load_model
    from infraplan.training.plan_train import plan_training
    from infraplan.workloads import TrainScenario

    page, errors = _page(browser, live_server, DESKTOP)
    page.goto(f"{live_server}/train")
    page.wait_for_selector('select[name=gpus] option[value="h100-sxm5-80gb"]', state="attached")
    entry = load_catalog().models.get("mistral-7b")
    page.set_input_files("#config-file", str(MODELS_DIR / entry.config_file))
    page.wait_for_selector('#inspect [data-label="parameters"]')
    page.select_option("select[name=gpus]", ["h100-sxm5-80gb"])
    page.fill("input[name=min_count]", "8")
    page.fill("input[name=max_count]", "8")
    page.fill("input[name=tokens]", "1e10")
    page.fill("input[name=global_batch]", "64")
    page.click("button[type=submit]")
    page.wait_for_selector('#result [data-label="step time"]', timeout=60_000)
    arch = load_model("mistral-7b")
    best = plan_training(TrainScenario.model_validate({
        "model": arch.name, "training": {"tokens": 1e10, "global_batch": 64, "seq_len": 4096},
        "hardware": {"gpus": ["h100-sxm5-80gb"], "min_count": 8, "max_count": 8}}),
        arch=arch).best[0]
    assert _text(page, "step time") == f"{best.step_s:,.3f} s"
    assert _text(page, "MFU") == f"{best.mfu:.1%}"
    page.close()
    assert not errors


def test_inspect_shows_the_sliding_window_as_the_cli(browser, live_server):
    """gpt-oss-120b showed only 'KV cache per token (bf16) 72.0 KiB'; `infraplan model`
    adds that past its 128-token window on half the layers a token adds 36.0 KiB."""
    from infraplan.report.model import model_summary

    cli = model_summary("gpt-oss-120b")["text"].splitlines()
    page, errors = _page(browser, live_server, PHONE)
    page.goto(f"{live_server}/?model=gpt-oss-120b")
    page.wait_for_selector('#inspect [data-label="sliding window"]')

    def shown(label: str) -> str:
        return page.locator(f'#inspect [data-label="{label}"] dd').inner_text()

    assert f"  sliding window of {shown('sliding window')}" in cli
    assert shown("sliding window") == ("128 tokens on 18 of 36 layers: past it, a token adds "
                                       "36.0 KiB in bf16")
    assert f"KV cache per token: {shown('KV cache per token')}" in cli
    page.close()
    assert not errors



def test_no_page_asks_for_a_missing_file(browser, live_server):
    """Each page asked for /favicon.ico: a 404 in the console. The icon is inline, in the
    report too."""
    from infraplan.report.html import render_document

    page, errors = _page(browser, live_server, DESKTOP)
    failed = []
    page.on("response", lambda r: failed.append(f"{r.status} {r.url}") if r.status >= 400
            else None)
    for path in ("/", "/memory", "/train", "/serve"):
        page.goto(live_server + path, wait_until="networkidle")
        # headless Chromium asks for no icon; a desktop browser asks for /favicon.ico
        icon = page.locator('link[rel="icon"]')
        assert icon.count() == 1 and icon.get_attribute("href").startswith("data:image/svg")
    page.close()
    assert not failed and not errors, failed + errors
    report = render_document({"title": "t", "kind": "memory", "model": "m", "sections": [],
                              "figures": {}})
    assert '<link rel="icon" href="data:image/svg+xml;base64,' in report
