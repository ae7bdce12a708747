"""Will it fit? /api/memory answers what `infraplan memory --json` prints, with the library's
numbers; bad input is one 422 naming the field; the /memory page shows the library's GiB and
verdict, keeps its state in the URL and reads on a phone."""

from __future__ import annotations

import json
import os

import pytest

from tests.web.conftest import ARTIFACTS, CHROMIUM
from tests.web.test_browser import DESKTOP, PHONE, _page, _text

FITS = {"model": "llama-3.1-8b", "gpu": "h100", "num_gpus": 8, "zero": 1}  # the page's form
OVER = dict(FITS, micro_batch=4)  # 4 sequences of 4,096 tokens per micro-batch: too many
# every knob set, for tests/web/test_fuzz.py to mutate
FUZZ_BODY = dict(OVER, finetune="lora", lora_rank=8, recompute="full", recompute_fraction=0.5,
                 tp=2, sequence_parallel=True)
# the same plans as `infraplan memory` flags
FLAGS = {"fits": ["--model", "llama-3.1-8b", "--gpu", "h100", "--num-gpus", "8", "--zero", "1"]}
FLAGS["over"] = FLAGS["fits"] + ["--micro-batch", "4"]
GIB = 2**30


def _library(micro_batch: int):
    """The library's report of FITS (micro_batch 1) or OVER (4), its fixes and GPU floor."""
    from infraplan.training.memory import memory_for_scenario, min_gpus_for_states, suggest_fixes
    from infraplan.workloads import MemoryScenario

    report = memory_for_scenario(MemoryScenario.model_validate({
        "model": "llama-3.1-8b", "hardware": {"gpu": "h100-sxm5-80gb", "num_gpus": 8},
        "training": {"seq_len": 4096},
        "parallelism": {"zero": 1, "micro_batch": micro_batch}}))
    fixes = [] if report.fits else suggest_fixes(report)
    return report, fixes, min_gpus_for_states(report)


def _cli_json(capsys, argv: list[str]) -> dict:
    from infraplan.cli import main

    code = main(["memory", *argv, "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == (0 if out["fits"] else 1)  # the exit status says whether it fits
    out.pop("schema")
    return out


@pytest.mark.parametrize("body, micro_batch, fits", [(FITS, 1, True), (OVER, 4, False)],
                         ids=["fits", "over"])
def test_numbers_are_the_librarys(client, body, micro_batch, fits):
    report, fixes, min_gpus = _library(micro_batch)
    r = client.post("/api/memory", json=body)
    assert r.status_code == 200, r.text
    got = r.json()["result"]
    assert report.fits is got["fits"] is fits
    for key in ("weights_bytes", "gradients_bytes", "optimizer_bytes", "activations_bytes",
                "overhead_bytes", "total_bytes", "capacity_bytes", "headroom_bytes"):
        assert got[key] == round(getattr(report, key)), key
    assert got["accelerator"] == "h100-sxm5-80gb" and got["plan"]["dp"] == 8
    assert got["fixes"] == [{"change": c, "total_bytes": round(f.total_bytes)}
                            for c, f in fixes]
    assert got["min_gpus_for_model_states"] == min_gpus == 2
    assert got["changes_per_fix"] == 1
    items = {i["label"]: i["text"] for s in r.json()["document"]["sections"]
             for i in s["items"]}
    assert items["verdict"] == ("fits" if fits else "DOES NOT FIT")
    assert items["memory per accelerator"] == \
        f"{report.total_bytes / GIB:,.1f} GiB of {report.capacity_bytes / GIB:,.1f} GiB"
    if not fits:  # the failing plan has single changes that fit, each under the capacity
        assert [c for c, _ in fixes] == ["--recompute full", "--micro-batch 1",
                                          "--tp 2 --dp 4"]
        assert all(f["total_bytes"] <= got["capacity_bytes"] for f in got["fixes"])
        bars = r.json()["document"]["figures"]["memory"]["data"][0]["y"]
        assert bars == ["8 x h100-sxm5-80gb", "with recompute = full",
                        "with micro_batch = 1", "with tp = 2, dp = 4"]


@pytest.mark.parametrize("body, flags", [(FITS, "fits"), (OVER, "over"),
                                         ({"model": "llama-3.1-8b", "gpu": "h100"}, None)],
                         ids=["fits", "over", "defaults"])
def test_result_is_what_the_cli_prints(client, capsys, body, flags):
    """The same JSON as `infraplan memory --json` (its defaults included: 1 GPU, 4,096)."""
    argv = FLAGS[flags] if flags else ["--model", "llama-3.1-8b", "--gpu", "h100"]
    r = client.post("/api/memory", json=body)
    assert r.status_code == 200, r.text
    assert r.json()["result"] == _cli_json(capsys, argv)


def test_fine_tuning_flags_are_the_clis(client, capsys):
    body = {"model": "llama-3.1-8b", "gpu": "a100-sxm4-40gb", "finetune": "qlora",
            "lora_rank": 64, "lora_targets": ["q_proj", "v_proj"], "seq_len": 2048,
            "recompute": "full", "recompute_fraction": 0.5, "optimizer": "adamw-8bit"}
    argv = ["--model", "llama-3.1-8b", "--gpu", "a100-sxm4-40gb", "--finetune", "qlora",
            "--lora-rank", "64", "--lora-targets", "q_proj,v_proj", "--seq-len", "2048",
            "--recompute", "full", "--recompute-fraction", "0.5", "--optimizer", "adamw-8bit"]
    r = client.post("/api/memory", json=body)
    assert r.status_code == 200, r.text
    got = r.json()["result"]
    assert got == _cli_json(capsys, argv)
    assert got["options"]["finetune"] == "qlora" and got["options"]["lora_rank"] == 64


def test_an_uploaded_config_is_the_catalog_models(client):
    from infraplan.catalog import MODELS_DIR, load_catalog

    entry = load_catalog().models.get("mistral-7b")
    config = json.loads((MODELS_DIR / entry.config_file).read_text())
    catalog = client.post("/api/memory", json=dict(OVER, model="mistral-7b")).json()["result"]
    r = client.post("/api/memory", json={**{k: v for k, v in OVER.items() if k != "model"},
                                         "config": config, "name": "mistral-7b"})
    assert r.status_code == 200, r.text
    assert r.json()["result"]["total_bytes"] == catalog["total_bytes"] > 0
    assert r.json()["result"]["fixes"] == catalog["fixes"]


@pytest.mark.parametrize("change, detail", [
    ({"gpu": "h10"}, "gpu: unknown accelerator 'h10'; did you mean 'h100-sxm5-80gb', "
                     "'h20-96gb', 'a10'? To fix: pick one from /api/catalog/gpus"),
    ({"gpu": "../etc/passwd"}, "gpu: accelerator '../etc/passwd' is not a catalog name"),
    ({"model": "lama-3.1-8b"}, "model: unknown model 'lama-3.1-8b'"),
    ({"tp": 3, "num_gpus": 3}, "tp=3 does not divide the 32 attention heads of llama-3.1-8b. "
                               "To fix: use tp in 1, 2, 4, 8, 16, 32"),
    ({"tp": 2, "num_gpus": 3}, "num_gpus=3 is not a multiple of tp*pp*cp = 2*1*1 = 2"),
    ({"dp": 3}, "tp*pp*dp*cp = 1*1*3*1 = 3 but num_gpus=8. To fix: make the degrees multiply "
                "to the GPU count, or leave dp out"),
    ({"seq_len": -4}, "seq_len: Input should be greater than or equal to 1 (got -4)"),
    ({"num_gpus": True}, "num_gpus: must be a JSON number, got true"),
    ({"seq_len": "4096"}, 'seq_len: must be a JSON number, got "4096"'),
    ({"zero": 4}, "zero: Input should be 0, 1, 2 or 3 (got 4)"),
    ({"sequence_parallel": True}, "request: sequence_parallel splits activations over the "
                                  "tensor-parallel ranks: it needs tp > 1"),
    ({"lora_rank": 8}, "request: lora_rank applies only with finetune lora or qlora (it "
                       "would be ignored)"),
    ({"gpu": "v100-32gb", "precision": "bf16"},
     "v100-sxm2-32gb does not support bf16 training: it has no bf16 tensor cores. To fix: "
     "use precision fp16"),
    # fp8 was a note ("emulated or unavailable") while plan train refused it
    ({"gpu": "a100", "precision": "fp8"},
     "a100-sxm4-80gb does not support fp8 training: it has no fp8 tensor cores. To fix: "
     "use precision bf16"),
    ({"colour": "red"}, "colour: Extra inputs are not permitted"),
], ids=lambda v: next(iter(v)) if isinstance(v, dict) else None)
def test_bad_input_is_422_naming_the_field(client, change, detail):
    r = client.post("/api/memory", json=dict(FITS, **change))
    assert r.status_code == 422, r.text
    assert r.json()["detail"].startswith(detail), r.json()["detail"]


def test_a_chip_without_bf16_is_checked_in_fp16_by_default(client):
    """The form's precision defaulted to bf16, so a V100 was refused until it was changed;
    left empty it is the chip's 16-bit type, as in the library."""
    for gpu, precision in (("v100-32gb", "fp16"), ("h100", "bf16")):
        r = client.post("/api/memory", json=dict(FITS, gpu=gpu))
        assert r.status_code == 200, r.text
        assert r.json()["result"]["options"]["precision"] == precision


def test_the_pages_link_to_memory(client):
    for path in ("/", "/train", "/serve", "/memory"):
        assert '<a href="/memory">Memory</a>' in client.get(path).text
    page = client.get("/memory").text
    assert 'data-endpoint="/api/memory"' in page and 'name="micro_batch"' in page


# ---- in a browser ----------------------------------------------------------------------

browser_only = pytest.mark.skipif(not os.path.exists(CHROMIUM),
                                  reason=f"no Chromium at {CHROMIUM}")


def _gib_text(report) -> str:
    return f"{report.total_bytes / GIB:,.1f} GiB of {report.capacity_bytes / GIB:,.1f} GiB"


def _readable_on_a_phone(page) -> None:
    """Nothing wider than the screen: no sideways scrolling to read the answer."""
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"], width
    box = page.locator('#result [data-label="verdict"]').bounding_box()
    assert box and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]


@browser_only
def test_memory_form(browser, live_server):
    report, fixes, min_gpus = _library(4)
    page, errors = _page(browser, live_server, DESKTOP)
    page.goto(f"{live_server}/memory")
    page.wait_for_selector('select[name=gpu] option[value="h100-sxm5-80gb"]', state="attached")
    page.wait_for_selector('select[name=model] option[value="llama-3.1-8b"]', state="attached")
    # the defaults: llama-3.1-8b on 8 x H100, tp 1, ZeRO-1, 4,096 tokens, 16-bit
    assert [page.input_value(f"[name={n}]") for n in ("model", "gpu", "num_gpus", "tp",
                                                     "zero", "seq_len", "precision")] == \
        ["llama-3.1-8b", "h100-sxm5-80gb", "8", "1", "1", "4096", ""]
    page.fill("input[name=micro_batch]", "4")
    page.click("button[type=submit]")
    page.wait_for_selector('#result [data-label="verdict"]', timeout=30_000)
    page.wait_for_selector("#fig-memory .main-svg")
    assert _text(page, "verdict") == "DOES NOT FIT"
    assert _text(page, "memory per accelerator") == _gib_text(report)
    assert _text(page, "fewest accelerators for the model states") == str(min_gpus)
    shown = page.inner_text("#result")
    assert all(f"{f.total_bytes / GIB:,.2f}" in shown for _, f in fixes)
    assert "recompute = full" in shown and "micro_batch = 1" in shown
    assert "micro_batch=4" in page.url and "gpu=h100-sxm5-80gb" in page.url
    page.screenshot(path=str(ARTIFACTS / "memory-desktop.png"), full_page=True)
    page.reload()  # the address bar alone restores the form and re-runs the check
    page.wait_for_selector('#result [data-label="verdict"]', timeout=30_000)
    assert page.input_value("input[name=micro_batch]") == "4"
    assert page.input_value("select[name=zero]") == "1"
    assert _text(page, "memory per accelerator") == _gib_text(report)
    shared = page.url
    page.close()
    phone, phone_errors = _page(browser, live_server, PHONE)
    phone.goto(shared.replace("micro_batch=4", "micro_batch=1"))  # the plan that fits
    phone.wait_for_selector('#result [data-label="verdict"]', timeout=30_000)
    phone.wait_for_selector("#fig-memory .main-svg")
    assert _text(phone, "verdict") == "fits"
    assert _text(phone, "memory per accelerator") == _gib_text(_library(1)[0])
    _readable_on_a_phone(phone)
    phone.screenshot(path=str(ARTIFACTS / "memory-phone.png"), full_page=True)
    phone.close()
    assert not errors and not phone_errors, errors + phone_errors


@pytest.mark.parametrize("body, knob", [
    (OVER, "dp"),  # tp = 2 halves dp
    (dict(FITS, tp=2, micro_batch=5), "sequence_parallel"),
    (dict(FITS, num_gpus=2, zero=3, seq_len=2048, micro_batch=2), "optimizer"),
    (dict(FITS, model="llama-3.1-70b", num_gpus=1, zero=0, finetune="lora", seq_len=512),
     "finetune"),
    # no single change fits: the button sets both knobs of the pair
    (dict(FITS, zero=0, cp=8, seq_len=131072), "recompute"),
    (dict(FITS, kernels="eager", recompute="full", seq_len=32768), "kernels"),
    (dict(FITS, recompute="full", recompute_fraction=0.1, seq_len=32768),
     "recompute_fraction"),
], ids=["dp", "sequence-parallel", "adamw-8bit", "qlora", "pair", "fused", "whole-recompute"])
def test_each_fix_button_sets_the_plan_it_names(client, body, knob):
    """Posting the form with a fix's fields gives the plan the fix was priced on."""
    answer = client.post("/api/memory", json=body).json()
    fixes, buttons = answer["result"]["fixes"], answer["document"]["apply"]
    assert len(buttons) == len(fixes) > 0
    assert any(knob in b["fields"] for b in buttons)
    for fix, button in zip(fixes, buttons):
        values = {k: (v == "true" if v in ("true", "false") else
                      int(v) if v.isdigit() else v) for k, v in button["fields"].items()}
        again = client.post("/api/memory", json={**body, **values}).json()["result"]
        assert again["fits"] and again["total_bytes"] == fix["total_bytes"], button
    if knob == "recompute":
        assert answer["result"]["changes_per_fix"] == 2
        assert [b["fields"] for b in buttons] == [{"zero": "1", "recompute": "full"},
                                                  {"recompute": "full",
                                                   "optimizer": "adamw-bf16"}]
        titles = [t["title"] for sec in answer["document"]["sections"]
                  for t in sec.get("tables", [])]
        assert "no single change fits; pairs of changes that do" in titles


@browser_only
def test_a_fix_is_one_click(browser, live_server):
    """Each suggested fix is a button: it sets the fix's fields (tp 2 halves dp too), checks
    again, and the plan that fits is in the address bar. A link may name the accelerator
    by an alias, as the CLI and the API accept (gpu=H100 was ignored from the link)."""
    report, fixes, _ = _library(4)
    fixed = dict(fixes)["--tp 2 --dp 4"]
    page, errors = _page(browser, live_server, PHONE)
    page.goto(f"{live_server}/memory?model=llama-3.1-8b&gpu=H100&num_gpus=8&zero=1"
              "&micro_batch=4")
    page.wait_for_selector('#result [data-label="verdict"]', timeout=30_000)
    assert page.input_value("select[name=gpu]") == "h100-sxm5-80gb"
    assert page.locator("#notice.hidden").count() == 1
    assert _text(page, "verdict") == "DOES NOT FIT"
    buttons = page.locator("#memory-fixes .apply button")
    assert buttons.all_inner_texts() == ["recompute = full", "micro_batch = 1",
                                        "tp = 2, dp = 4"]
    done = page.get_attribute("form.plan", "data-done")
    buttons.nth(2).click()
    page.wait_for_function(f"document.querySelector('form.plan').dataset.done !== '{done}'",
                           timeout=30_000)
    assert _text(page, "verdict") == "fits"
    assert _text(page, "memory per accelerator") == _gib_text(fixed)
    assert [page.input_value(f"[name={n}]") for n in ("tp", "dp", "micro_batch")] == \
        ["2", "4", "4"]
    assert "tp=2" in page.url and "dp=4" in page.url and "gpu=h100-sxm5-80gb" in page.url
    assert page.locator("#memory-fixes").count() == 0  # a plan that fits has no fixes
    _readable_on_a_phone(page)
    page.close()
    assert not errors


@browser_only
def test_memory_bad_input_shows_the_field(browser, live_server):
    page, errors = _page(browser, live_server, PHONE)
    page.goto(f"{live_server}/memory?model=llama-3.1-8b&gpu=h100-sxm5-80gb&num_gpus=3&tp=3")
    page.wait_for_selector("#error:not(.hidden)", timeout=30_000)
    assert page.inner_text("#error").startswith("tp=3 does not divide the 32 attention heads")
    assert page.inner_html("#result") == ""
    page.close()
    assert not errors
