"""The HTML report: self-contained (plotly inlined, nothing fetched), the library's numbers,
atomic writes, clear errors for files that are not training or serving scenarios."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import re

import pytest

from infraplan.errors import InputError
from tests.conftest import require
from tests.web.conftest import EXAMPLES, example_document

TRAIN = EXAMPLES / "train-llama-3.1-70b.yaml"
SERVE = EXAMPLES / "serve-llama8b-chat.yaml"
EXTERNAL = re.compile(r"<(script|link|img|iframe|source)\b[^>]*\b(src|href)\s*=\s*[\"']?"
                      r"(https?:)?//", re.IGNORECASE)


def _embedded(html: str) -> dict:
    match = re.search(r'<script type="application/json" id="infraplan-data">(.*?)</script>',
                      html, re.DOTALL)
    assert match, "the document JSON is embedded"
    return json.loads(match.group(1))


def _spy(monkeypatch, module, name):
    """Wrap module.name so the test sees what the report got from the library call."""
    calls = []
    real = getattr(module, name)

    def wrapper(*args, **kwargs):
        calls.append(real(*args, **kwargs))
        return calls[-1]

    monkeypatch.setattr(module, name, wrapper)
    return calls


@pytest.fixture(scope="module")
def train_report():
    require("plotly")
    from infraplan.report.html import render_report
    from infraplan.training import plan_train

    with pytest.MonkeyPatch.context() as mp:
        calls = _spy(mp, plan_train, "plan_training")
        html = render_report(TRAIN)
    assert len(calls) == 1
    return html, calls[0]


@pytest.fixture(scope="module")
def serve_report():
    require("plotly")
    from infraplan.report import document_serve
    from infraplan.report.html import render_report

    with pytest.MonkeyPatch.context() as mp:
        calls = _spy(mp, document_serve, "plan_serving")
        html = render_report(SERVE)
    assert len(calls) == 1
    return html, calls[0]


@pytest.mark.parametrize("which", ["train_report", "serve_report"])
def test_self_contained(which, request):
    from infraplan.report.html import plotly_js

    html, _ = request.getfixturevalue(which)
    assert plotly_js()[:2000] in html, "plotly.min.js is inlined"
    assert not EXTERNAL.search(html), "no script, link or image is fetched from the network"
    assert "fonts.googleapis" not in html and "@import" not in html
    assert '<meta name="viewport"' in html
    doc = _embedded(html)
    headings = [(s["framework"], s["heading"]) for s in doc["sections"]]
    assert headings == [("SCALE", h) for h in ("Scale", "Compute", "Accelerator interconnect",
                                               "Latency & locality", "Economics")] + [
        ("DEPLOY", h) for h in ("Define workload", "Estimate throughput", "Pick platform",
                                "Load-test", "Observe", "Yield plan")]
    for s in doc["sections"]:
        assert f">{s['heading']}</h2>" in html.replace("&amp;", "&")
        for key in s["figures"]:
            assert key in doc["figures"] and f'data-figure="{key}"' in html
    assert any("not applicable to this scenario" in (s["not_applicable"] or "")
               for s in doc["sections"])


def test_training_numbers_are_the_library_call(train_report):
    from infraplan.report.figures import json_safe
    from infraplan.units import GiB

    html, result = train_report
    doc = _embedded(html)
    assert doc["plan"] == json_safe(result.to_json())  # every number of `plan train --json`
    best = result.best[0]
    for text in (f"{best.step_s:,.3f} s", f"{best.mfu:.1%}", f"{best.tokens_per_s:,.0f}",
                 f"{best.gpu_hours:,.0f}", f"{best.time_to_train_s / 86400:,.1f} days",
                 f"{best.memory_bytes / GiB:.1f} GiB of {best.capacity_bytes / GiB:.1f} GiB",
                 f"{best.plan.num_gpus:,} x {best.accelerator}", best.plan.describe()):
        assert text in html, text
    assert set(doc["figures"]) >= {"frontier_gpu_hours", "frontier_usd", "step_breakdown",
                                   "memory", "goodput", "cost"}
    chosen = doc["figures"]["frontier_gpu_hours"]["data"][-1]
    assert chosen["name"] == "chosen plan" and chosen["x"] == [pytest.approx(best.gpu_hours)]
    # memory bars are the memory model's totals of the same plans
    assert doc["memory"][0]["total_bytes"] == pytest.approx(best.memory_bytes)
    # cost: the line items plan train attached to the same plan (GPU-hours x its price)
    items = best.economics["cost"]["items"]
    assert [c["usd"] for c in doc["costs"]] == [pytest.approx(i["usd"]) for i in items]
    assert doc["costs"][0]["usd"] == pytest.approx(
        best.gpu_hours * best.economics["usd_per_gpu_hour"])
    # energy: the figure in its card (the card held the whole formula), the formula below
    economics = next(s for s in doc["sections"] if s["heading"] == "Economics")
    energy = next(i for i in economics["items"] if i["label"] == "energy")
    assert energy["text"] == f"{best.economics['energy_kwh']:,.0f} kWh"
    assert f"energy: {best.economics['energy_formula']}" in economics["paragraphs"]


def test_serving_numbers_are_the_cli_numbers(serve_report):
    from infraplan.cli import main
    from infraplan.report.figures import json_safe

    html, plan = serve_report
    doc = _embedded(html)
    assert doc["plan"] == json_safe(dict(model="llama-3.1-8b", **plan.to_json()))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["simulate", "serve", str(SERVE), "--json"]) == 0
    cli = json.loads(out.getvalue())
    sim = doc["simulation"]
    for key in ("ttft_s", "tpot_s", "e2e_s", "throughput", "kv_cache", "cost"):
        assert sim[key] == pytest.approx(cli[key]), key
    assert sim["completed"] == cli["completed"] and sim["deployment"] == cli["deployment"]
    for text in (f"{cli['ttft_s']['p99'] * 1e3:,.1f} ms", f"{cli['tpot_s']['p99'] * 1e3:,.1f} ms",
                 f"{cli['throughput']['requests_per_s']:,.2f} requests/s",
                 f"${cli['cost']['usd_per_million_output_tokens']:,.3f}",
                 f"{plan.best.describe()} at ${plan.best.usd_per_hour:,.2f}/h"):
        assert text in html, text
    assert set(doc["figures"]) >= {"latency_cdf", "load_sweep", "memory", "cost"}
    # the simulated deployment's bar, then the plan's others: the best (h100 fp8, the
    # deployment's memory on one GPU) was drawn a second time
    memory = doc["figures"]["memory"]["data"]
    bars = list(zip(*(trace["x"] for trace in memory)))
    assert len(bars) > 2 and len(set(bars)) == len(bars)
    sweep = doc["load_sweep"]
    # the planning rate's shares, then (the deployment's capacity far above the rate) 75%
    # and 90% of the capacity: 50% of it is within 10% of 125% of the rate
    capacity = sim["capacity"]["requests_per_s"]
    assert [p["fraction"] for p in sweep[:5]] == [0.25, 0.5, 0.75, 1.0, 1.25]
    assert [p["rate_per_s"] for p in sweep[5:]] == pytest.approx(
        [f * capacity for f in (0.75, 0.9)])
    assert sweep[0]["rate_per_s"] == pytest.approx(0.25 * plan.rate_per_s)


OLD_REPORT = "<title>last week: infraplan report</title>"  # what an earlier run wrote


def test_atomic_write(tmp_path, monkeypatch):
    require("plotly")
    import infraplan.report.html as report_html

    out = tmp_path / "report.html"
    out.write_text(OLD_REPORT)
    with pytest.raises(InputError):
        report_html.write_report(tmp_path / "missing.yaml", out)
    assert out.read_text() == OLD_REPORT

    def broken(_, progress=None, seed=None):
        raise RuntimeError("planner crashed half-way")

    monkeypatch.setattr(report_html, "render_report", broken)
    with pytest.raises(RuntimeError):
        report_html.write_report(TRAIN, out)
    assert out.read_text() == OLD_REPORT

    monkeypatch.setattr(report_html, "render_report",
                        lambda _, progress=None, seed=None: "<html>new</html>")
    report_html.write_report(TRAIN, out)
    assert out.read_text() == "<html>new</html>"
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"], "no temporary file left"
    assert out.stat().st_mode & 0o044, "readable like any other file"
    with pytest.raises(InputError, match="output folder"):
        report_html.write_atomic(tmp_path / "nope" / "r.html", "x")


def test_report_never_replaces_what_is_not_a_report(tmp_path, monkeypatch):
    """`report -o` replaced the scenario itself, notes, pipes and links' targets; a private
    report became world-readable."""
    import os

    import infraplan.report.html as report_html

    monkeypatch.setattr(report_html, "render_report", lambda _, progress=None, seed=None:
                        "<title>new: infraplan report</title>")
    scenario = tmp_path / "s.yaml"
    scenario.write_text(TRAIN.read_text())
    notes = tmp_path / "notes.txt"
    notes.write_text("mine")
    link = tmp_path / "link.html"
    link.symlink_to(tmp_path / "target.html")
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    for out, why in ((scenario, "is not an infraplan report"),
                     (notes, "is not an infraplan report"),
                     (link, "link, device or pipe"), (pipe, "link, device or pipe")):
        with pytest.raises(InputError, match=why):
            report_html.write_report(scenario, out)
    assert scenario.read_text() == TRAIN.read_text() and notes.read_text() == "mine"
    assert link.is_symlink() and not (tmp_path / "target.html").exists()
    private = tmp_path / "private.html"
    private.write_text(OLD_REPORT)
    private.chmod(0o600)
    report_html.write_report(scenario, private)
    assert private.read_text().startswith("<title>new")
    assert private.stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("text, match", [
    ("model: x\nhardware: {gpu: h100}\ntraining: {seq_len: 10}\n", "unknown model 'x'"),
    ("model: x\nfoo: 1\n", "neither a training scenario"),
    ("- a\n- b\n", "expected a mapping"),
    ("model: [unclosed\n", "not valid YAML"),
    ("", "s.yaml is empty"),
])
def test_not_a_scenario(tmp_path, text, match):
    from infraplan.report.document import build_document

    path = tmp_path / "s.yaml"
    path.write_text(text)
    with pytest.raises(InputError, match=match):
        build_document(path)


def test_a_memory_scenario_reports_its_breakdown_and_fixes_in_scenario_keys(tmp_path):
    from infraplan.report.document import build_document
    from infraplan.report.html import render_document
    from infraplan.training.fit_check import fit_check
    from infraplan.scenario_files import load_scenario
    from infraplan.workloads import MemoryScenario

    path = tmp_path / "m.yaml"
    path.write_text("name: 8B on 8 H100s\nmodel: llama-3.1-8b\n"
                    "hardware: {gpu: h100, num_gpus: 8}\ntraining: {seq_len: 4096}\n")
    doc = build_document(path)
    check = fit_check(load_scenario(path, MemoryScenario))
    assert doc["kind"] == "memory" and doc["title"] == "8B on 8 H100s"
    assert not check.report.fits and check.fixes
    fixes = next(s for s in doc["sections"] if s["heading"] == "Fixes")["tables"][0]
    assert fixes["title"] == "single changes that fit"
    # each fix as the scenario keys that make it, with the library's total
    assert [row[:2] for row in fixes["rows"]] == [
        [", ".join(f"{path_}: {value}" for path_, value in _keys(label)),
         f"{fixed.total_bytes / 2**30:,.2f}"] for label, fixed in check.fixes]
    assert fixes["rows"][0][0] == "parallelism.zero: 1"
    assert doc["memory"][0]["total_bytes"] == check.report.total_bytes
    html = render_document(doc)
    assert "infraplan memory check for llama-3.1-8b" in html
    # ZeRO divides the states, not the parameter count the card shows: it says so
    items = {i["label"]: i["value"] for s in doc["sections"] for i in s["items"]}
    assert items["parameters per accelerator before ZeRO sharding"] == check.report.params_per_gpu
    assert "SI units inside" not in html and "Memory in GiB" in html  # the report is GiB
    with pytest.raises(InputError, match="a memory report draws nothing at random"):
        build_document(path, seed=1)


def _keys(label: str) -> list[tuple[str, str]]:
    """'--tp 2 --dp 4' -> [('parallelism.tp', '2'), ('parallelism.dp', '4')]"""
    words, out = label.split(), []
    for i, word in enumerate(words):
        if word.startswith("--"):
            value = words[i + 1] if i + 1 < len(words) and not words[i + 1].startswith("--") \
                else "true"
            name = word[2:].replace("-", "_")
            where = {"finetune": "finetune.method"}.get(name, (
                "training." if name in ("optimizer",) else "parallelism.") + name)
            out.append((where, value))
    return out


def _parser():
    from infraplan.cli import _Parser
    from infraplan.web.cli import add_report, add_ui

    parser = _Parser(prog="infraplan")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    add_report(sub)
    add_ui(sub)
    return parser


def test_cli_report_command(tmp_path, monkeypatch, capsys):
    require("plotly")
    import infraplan.report.html as report_html

    monkeypatch.setattr(report_html, "render_report",
                        lambda path, progress=None, seed=None: f"<html>{path}</html>")
    args = _parser().parse_args(["report", str(SERVE), "-o", str(tmp_path / "r.html")])
    assert args.run(args) == 0
    assert (tmp_path / "r.html").read_text() == f"<html>{SERVE}</html>"
    assert "wrote" in capsys.readouterr().out
    args = _parser().parse_args(["report", str(tmp_path / "missing.yaml")])
    monkeypatch.undo()
    with pytest.raises(InputError, match="does not exist"):
        args.run(args)


def test_cli_ui_arguments():
    args = _parser().parse_args(["ui"])
    assert (args.host, args.port) == ("127.0.0.1", 8000)
    with pytest.raises(SystemExit) as exc:
        _parser().parse_args(["ui", "--port", "70000"])
    assert exc.value.code == 2
    assert isinstance(_parser(), argparse.ArgumentParser)


def test_cli_ui_refuses_an_address_it_cannot_listen_on(capsys):
    """uvicorn logged these and exited 3 (a name that does not resolve) or kept running."""
    import socket

    from infraplan.cli import main

    require("fastapi")
    require("uvicorn")
    assert main(["ui", "--host", "no-such-host.invalid"]) == 2
    assert "--host 'no-such-host.invalid' does not resolve" in capsys.readouterr().err
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["ui", "--port", str(port)]) == 2
    assert f"cannot listen on 127.0.0.1:{port} (Address already in use)" in \
        capsys.readouterr().err


def test_report_to_a_directory_or_an_unusable_path_exits_2_before_planning(tmp_path,
                                                                        monkeypatch, capsys):
    """-o at an existing directory crashed with IsADirectoryError after the whole planning
    run; a name too long for the file system crashed with OSError."""
    require("plotly")
    import infraplan.report.html as report_html
    from infraplan.cli import main

    def never(*_, **__):
        raise AssertionError("the output is checked before planning")

    monkeypatch.setattr(report_html, "render_report", never)
    assert main(["report", str(SERVE), "-o", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "is a directory, not a file" in err and "report.html" in err
    assert main(["report", str(SERVE), "-o", str(tmp_path / ("x" * 300))]) == 2
    assert "not a usable path (File name too long)" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_a_failed_write_keeps_the_old_report_and_is_an_input_error(tmp_path, monkeypatch):
    """A full disk or a read-only folder: the old file stays whole, no temporary file is left,
    and the CLI gets an InputError (exit 2) instead of an OSError traceback."""
    import errno

    import infraplan.report.html as report_html

    out = tmp_path / "report.html"
    out.write_text(OLD_REPORT)

    def full(*_):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(report_html.os, "replace", full)
    with pytest.raises(InputError, match="cannot write .*No space left on device"):
        report_html.write_atomic(out, "<html>new</html>")
    assert out.read_text() == OLD_REPORT
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]


def test_script_json_escapes_every_markup_character():
    from infraplan.report.html import script_json

    data = {"name": "a <!--<script> </script> & b >", "n": [1, 2.5, None]}
    text = script_json(data)
    assert json.loads(text) == data
    assert text == ('{"name":"a \\u003c!--\\u003cscript\\u003e \\u003c/script\\u003e '
                    '\\u0026 b \\u003e","n":[1,2.5,null]}')


def test_a_scenario_named_with_comment_and_script_markup_keeps_the_data_block(
        tmp_path, monkeypatch):
    """'<!--<script>' in a scenario name put the HTML parser in its escaped-script state:
    the data block's </script> no longer closed it and the page's script broke."""
    require("plotly")
    from infraplan.report import document
    from infraplan.report.html import render_report

    name = "evil <!--<script> x </script> & y >"
    text = SERVE.read_text().replace("name: llama-3.1-8b chat", f"name: {json.dumps(name)}")
    text = text.replace("num_requests: 3000", "num_requests: 300")
    scenario = tmp_path / "evil.yaml"
    scenario.write_text(text.replace("gpus: [h100, a100-sxm4-80gb, l40s]", "gpus: [h100]"))
    built = _spy(monkeypatch, document, "build_document")
    html = render_report(scenario)
    marker = '<script type="application/json" id="infraplan-data">'
    start = html.index(marker) + len(marker)
    block = html[start:html.index("</script>", start)]
    assert json.loads(block) == json.loads(json.dumps(built[0]))
    assert json.loads(block)["title"] == name
    assert "<" not in block and ">" not in block and "&" not in block


def test_yield_plan_is_simulate_trains_checkpoint_plan():
    """Regression: the report checkpointed article 4 to the local NVMe, ignored
    run.asynchronous and left failure detection out of the restart (0.058 s vs 601.85 s)."""
    from infraplan.report.document_train import training_document
    from infraplan.training.plan_train import plan_training
    from infraplan.training.simulate_run import run_setup
    from infraplan.scenario_files import load_scenario
    from infraplan.workloads import TrainScenario

    scenario = load_scenario(str(EXAMPLES / "article-4-2b-spot.yaml"), TrainScenario)
    result = plan_training(scenario)
    doc = training_document(scenario, result)
    setup = run_setup(scenario, result.best[0])
    k = doc["checkpoints"]
    assert k["storage_tier"] == setup.tier.name == "fsx-lustre-p2-125"
    assert k["restart_s"] == pytest.approx(setup.restart_s) == pytest.approx(601.85, abs=0.01)
    assert (k["mtbf_s"], k["interval_s"], k["blocking_s"], k["size_bytes"]) == pytest.approx(
        (setup.mtbf_s, setup.checkpoint.interval_s, setup.checkpoint.blocking_s,
         setup.checkpoint.size_bytes))
    section = next(s for s in doc["sections"] if s["heading"] == "Yield plan")
    texts = {i["label"]: i["text"] for i in section["items"]}
    assert texts["checkpoint size"] == "23.1 GB"
    assert texts["training blocked per checkpoint (async)"] == "14.5 ms"
    assert texts["restart (failure detection + reload)"] == \
        "10.0 min: 10.0 min detection + 1.85 s reload"
    assert texts["wall time lost, assumed by plan train"] == "10%"
    assert texts["wall time lost, modelled for this plan"] == \
        f"{setup.checkpoint.waste_fraction:.2%}"
    assert "assume 90% goodput" in section["paragraphs"][0]
    sync = scenario.model_copy(update={"run": scenario.run.model_copy(
        update={"asynchronous": False})})
    sync_doc = training_document(sync, result)
    sync_section = next(s for s in sync_doc["sections"] if s["heading"] == "Yield plan")
    assert "training blocked per checkpoint (synchronous)" in [
        i["label"] for i in sync_section["items"]]
    assert sync_doc["checkpoints"]["blocking_s"] == pytest.approx(setup.checkpoint.write_s)


def test_yield_plan_names_daly_apart_from_the_interval_used():
    """405B on 16,384 H100s: the Yield plan's 'checkpoint interval (Daly)' read 56.8 s, the
    5.68 TB upload the interval is raised to; Daly's own is 17.6 s (0.0139 s blocking, job
    MTBF 11,135 s). Both are shown, and the goodput figure marks both."""
    from infraplan.report.document_train import training_document
    from infraplan.training.plan_train import plan_training
    from infraplan.scenario_files import load_scenario
    from infraplan.workloads import TrainScenario

    scenario = TrainScenario.model_validate({
        "model": "llama-3.1-405b", "prices": {"h100": 2.0}, "top": 1,
        "training": {"tokens": 15.6e12, "global_batch": 2048, "seq_len": 8192},
        "hardware": {"gpus": ["h100"], "counts": [16384]}})
    doc = training_document(scenario, plan_training(scenario))
    k = doc["checkpoints"]
    assert k["daly_interval_s"] == pytest.approx(17.6, abs=0.05)
    assert k["interval_s"] == k["write_s"] == pytest.approx(56.8, abs=0.05)
    section = next(s for s in doc["sections"] if s["heading"] == "Yield plan")
    texts = {i["label"]: i["text"] for i in section["items"]}
    assert texts["checkpoint interval (Daly)"] == "17.6 s"
    assert texts["checkpoint interval used"] == (
        "56.8 s: Daly's raised to the checkpoint's upload, since a checkpoint cannot start "
        "before the last one is durable")
    marks = {t["name"]: t["x"][0] * 60 for t in doc["figures"]["goodput"]["data"]
             if t["mode"] == "markers"}
    assert marks == pytest.approx({"interval used": k["interval_s"],
                                   "Daly's (shorter than the upload)": k["daly_interval_s"]})
    # a checkpoint that lands well within Daly's interval: the interval is Daly's
    small = load_scenario(str(EXAMPLES / "article-4-2b-spot.yaml"), TrainScenario)
    small_doc = training_document(small, plan_training(small))
    section = next(s for s in small_doc["sections"] if s["heading"] == "Yield plan")
    texts = {i["label"]: i["text"] for i in section["items"]}
    # its run: block simulates each strategy at its own interval: the card names those
    # first, then the first-order plan's (audit s60)
    assert texts["checkpoint interval used"].startswith("simulated (the scan's least mean ")
    assert texts["checkpoint interval used"].endswith(
        f"; first-order plan: {texts['checkpoint interval (Daly)']}: Daly's")
    assert [t["name"] for t in small_doc["figures"]["goodput"]["data"]] == \
        ["goodput", "interval used"]


def test_a_run_block_puts_simulate_trains_strategies_in_the_yield_plan(capsys):
    """A scenario with run: asks for on-demand, spot and reserved runs; the report used to
    show none of them. Its table is simulate train's, row for row, and --seed reaches it."""
    from infraplan.cli import main
    from infraplan.report.document import build_document

    path = EXAMPLES / "article-4-2b-spot.yaml"
    for seed in (None, 3):
        doc = build_document(path, seed=seed)
        assert main(["simulate", "train", str(path)] + ([] if seed is None else
                                                         ["--seed", str(seed)])) == 0
        cli = capsys.readouterr().out
        section = next(s for s in doc["sections"] if s["heading"] == "Yield plan")
        (strategies,) = [t for t in section["tables"] if "pricing strategies" in t["title"]]
        assert [r[0] for r in strategies["rows"]] == ["on-demand", "spot",
                                                      "reserved + spot burst"]
        # the means are labelled as means, and a paragraph says what p50 and p90 are
        assert strategies["columns"][8:] == ["interruptions mean", "preemptions mean",
                                             "reserved term, committed"]
        assert "P50: the median trial; p90: 1 trial in 10 runs longer or costs more; " \
            "goodput p10: 1 trial in 10 has less (the median trial of a rarely interrupted " \
            "run has no failure); interruptions (failures and preemptions) and " \
            "preemptions: means over the trials." in section["paragraphs"]
        assert set(doc["run"]["strategies"]["spot"]["goodput"]) == {"p10", "p50", "mean"}
        # whose spot notice and preemption rate, as the CLI says it
        (spot_terms,) = [p for p in section["paragraphs"] if p.startswith("Spot capacity")]
        assert spot_terms.startswith("Spot capacity (taken as nebius's, the catalog's "
                                     "cheapest spot offer for h100-sxm5-80gb): notice 120 s, "
                                     "AWS's (the catalog has no spot notice for nebius)")
        assert "s" + spot_terms[1:-1] in cli
        for row in strategies["rows"]:  # the CLI's table row, cell for cell
            assert re.search(r"\s+".join(map(re.escape, row)), cli), row
        assert any(p.startswith("spot: ") and "cheaper than on-demand" in p
                   and p in cli for p in section["paragraphs"])
        assert f"seed {seed or 0};" in " ".join(section["paragraphs"])
        assert doc["run"]["strategies"]["spot"]["seed"] == (seed or 0)
        # the checkpoint in the same unit in both (it was 21.54 GiB beside 23.1 GB)
        sizes = {i["label"]: i["text"] for i in section["items"]}
        assert sizes["checkpoint size"] == "23.1 GB" and "checkpoint 23.13 GB to " in cli
    plain = example_document(TRAIN.name)  # no run: block, no Monte-Carlo runs
    assert plain["run"] is None
    assert not next(s for s in plain["sections"] if s["heading"] == "Yield plan")["tables"]


def test_checkpoints_are_billed_where_the_run_writes_them(tmp_path):
    """run.checkpoint_storage names the tier; the bill used to price the kept copies at
    S3's $0.023/GB-month while the Yield plan wrote them to FSx ($0.145)."""
    import yaml

    from infraplan.report.document import build_document

    raw = yaml.safe_load((EXAMPLES / "article-4-2b-spot.yaml").read_text())
    raw["costs"] = {"checkpoint_gb": 100, "checkpoints_kept": 3}
    path = tmp_path / "billed.yaml"
    path.write_text(yaml.safe_dump(raw))
    doc = build_document(path)
    (line,) = [i for i in doc["costs"] if i["item"] == "storage: checkpoints"]
    months = doc["plan"]["best"][0]["time_to_train_s"] / (30.44 * 86400)
    assert line["usd"] == pytest.approx(3 * 100 * 0.145 * months)
    assert "(fsx-lustre-p2-125)" in line["basis"]
    yield_plan = next(s for s in doc["sections"] if s["heading"] == "Yield plan")
    # the tiers agree: no tier note (the size note may stand: 100 GB is not this model's)
    assert not any(p.startswith("Checkpoints are written to") for p in yield_plan["paragraphs"])
    # a tier named in costs: wins, and the report says the two differ
    raw["costs"]["checkpoint_tier"] = "s3-standard"
    path.write_text(yaml.safe_dump(raw))
    doc = build_document(path)
    (line,) = [i for i in doc["costs"] if i["item"] == "storage: checkpoints"]
    assert line["usd"] == pytest.approx(3 * 100 * 0.023 * months)
    yield_plan = next(s for s in doc["sections"] if s["heading"] == "Yield plan")
    assert any(p.startswith("Checkpoints are written to fsx-lustre-p2-125; the cost bills "
                            "the 3 kept copies of 100 GB") for p in yield_plan["paragraphs"])


@pytest.mark.parametrize("value,text", [(23.13e9, "23.1 GB"), (5.69e12, "5.69 TB"),
                                        (999e9, "999 GB"), (2e6, "2.00 MB")])
def test_sizes_keep_three_significant_figures(value, text):
    from infraplan.report.document_train import size_text

    assert size_text(value) == text


@pytest.mark.parametrize("value,text", [(0.0145, "14.5 ms"), (1.85, "1.85 s"), (0.0, "0.00 s"),
                                        (601.85, "10.0 min"), (2.85e6, "792 h"),
                                        (2e-5, "20.0 us")])
def test_durations_keep_three_significant_figures(value, text):
    from infraplan.units import duration_text

    assert duration_text(value) == text


def test_report_seed_is_the_simulation_seed(tmp_path):
    """`report --seed N` draws the serving simulation as `simulate serve --seed N` does, and
    the document names the seed; a training report draws nothing at random."""
    import yaml

    from infraplan.cli import main
    from infraplan.report.document import build_document

    raw = yaml.safe_load(SERVE.read_text())
    raw.pop("search")
    raw["traffic"]["num_requests"] = 300
    scenario = tmp_path / "serve.yaml"
    scenario.write_text(yaml.safe_dump(raw))
    args = _parser().parse_args(["report", str(scenario), "--seed", "7"])
    assert args.seed == 7
    docs = {seed: build_document(scenario, seed=seed) for seed in (None, 7)}
    for seed, doc in docs.items():
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert main(["simulate", "serve", str(scenario), "--json"]
                        + ([] if seed is None else ["--seed", str(seed)])) == 0
        cli = json.loads(out.getvalue())
        assert doc["simulation"]["ttft_s"] == pytest.approx(cli["ttft_s"]), seed
        shown = {i["label"]: i["text"] for s in doc["sections"] for i in s["items"]}
        assert shown["random seed"] == str(0 if seed is None else seed)
    assert docs[7]["simulation"]["ttft_s"]["p99"] != docs[None]["simulation"]["ttft_s"]["p99"]
    with pytest.raises(InputError, match="--seed: a training report draws nothing.*run: "):
        build_document(TRAIN, seed=7)  # no run: block to draw


def test_a_diurnal_reports_run_says_which_hours_it_covers():
    """The report simulated the scenario's deployment over the first 0.27 h of the curve
    (the night trough: $9.81 per million tokens) beside a plan for the peak, and only
    `simulate serve` said so."""
    from infraplan.report.document_serve import serving_document
    from infraplan.serving.scenario import ServeScenario
    from infraplan.scenario_files import load_scenario

    path = EXAMPLES / "serve-llama70b-diurnal.yaml"
    scenario = load_scenario(str(path), ServeScenario)
    doc = serving_document(scenario, base_dir=path.parent, sweep=False)
    assert doc["plan"] is not None and doc["simulation"]["simulated"] == \
        "the scenario's deployment"
    scale = next(s for s in doc["sections"] if s["heading"] == "Scale")
    window = [p for p in scale["paragraphs"] if "of the diurnal curve, not its peak" in p]
    assert len(window) == 1 and window[0].startswith("the 2,000 requests arrive over hours 0 ")
    assert window == [n for n in doc["simulation"]["notes"] if "diurnal curve" in n]


def test_the_load_sweep_names_its_run_length(serve_report):
    """The sweep and the latency section run different lengths, and the title says so.
    Below capacity each point runs the planner's steady-state window (it ran 1,500 requests
    a point from empty engines: at 49.5 requests/s it completed 33.35 a second and read a
    p99 end to end of 21.1 s, against 32.8 s once the queue has settled)."""
    from infraplan.serving.window import MAX_WINDOW_REQUESTS, WINDOW_SLACK, steady_requests

    html, _ = serve_report
    doc = _embedded(html)
    sweep = next(s for s in doc["sections"] if s["heading"] == "Load-test")
    counts = sorted(p["requests"] for p in doc["load_sweep"])
    assert sweep["tables"][0]["title"] == (
        f"simulated load sweep ({counts[0]:,} to {counts[-1]:,} requests a point; the run "
        f"above has {doc['simulation']['requests']:,}, so its p99s differ a little at the "
        "same load)")
    capacity = doc["load_sweep"][-1]["rate_per_s"] / 0.9  # the last point: 90% of it
    for p in doc["load_sweep"]:
        assert p["steady_window"] and p["keeps_up"]
        need = min(steady_requests(p["rate_per_s"] / capacity), MAX_WINDOW_REQUESTS)
        assert p["requests"] >= max(WINDOW_SLACK * need, doc["simulation"]["requests"])
    top = doc["load_sweep"][-1]  # a long window's completions keep up with its arrivals
    assert top["requests_per_s"] > 0.95 * top["rate_per_s"]


@pytest.mark.parametrize("seconds,text", [(0.2624, "262.4 ms"), (9.9494, "9,949.4 ms"),
                                          (9.99996, "10.0 s"), (17.938, "17.9 s"), (30.0, "30.0 s"),
                                          (1234.5, "1,234.5 s"), (None, "-")])
def test_latencies_of_ten_seconds_and_more_read_in_seconds(seconds, text):
    """'17,938.0 ms' and 'SLO ≤ 30,000.0 ms' were hard to read."""
    from infraplan.report.document import ms

    assert ms(seconds) == text


@pytest.mark.parametrize("value,text", [(2.694, "$2.69"), (999.994, "$999.99"),
                                        (9040.12, "$9,040"), (1_577_733.98, "$1,577,734"),
                                        (None, "-")])
def test_dollars_from_a_thousand_drop_the_cents(value, text):
    """'$1,577,733.98' claimed a precision no forecast has."""
    from infraplan.report.document import usd

    assert usd(value) == text


@pytest.mark.parametrize("name", ["memory-llama-3.1-8b-qlora.yaml",
                                  "memory-llama-3.1-70b-fsdp-sft.yaml",
                                  "memory-mixtral-8x7b-pretrain.yaml",
                                  "memory-gpt3-175b-megatron.yaml"])
def test_the_memory_headroom_is_the_difference_of_the_figures_shown(name):
    """'61.0 GiB of 79.6 GiB' beside '18.7 GiB to spare' (the exact headroom, rounded)."""
    import re
    from pathlib import Path

    from infraplan.report.document_memory import memory_document
    from infraplan.training.fit_check import fit_check
    from infraplan.scenario_files import load_scenario

    path = Path(__file__).parents[2] / "examples" / name
    doc = memory_document(fit_check(load_scenario(path)))
    items = {i["label"]: i["text"] for s in doc["sections"] for i in s["items"]}
    used, capacity = map(float, re.findall(r"([\d.]+) GiB", items["memory per accelerator"]))
    spare = float(re.match(r"([\d.]+) GiB", items["headroom"]).group(1))
    assert spare == pytest.approx(abs(capacity - used), abs=1e-9)
