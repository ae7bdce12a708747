"""`infraplan simulate serve` as a first-time user reads it (audit s61): a header that
claimed a max_num_seqs a static batch overrode, a run that dropped 99% of its requests
looking healthy, e-notation in the -q line, and hours of waiting shown in milliseconds."""

from __future__ import annotations

import re
from pathlib import Path

from infraplan.cli import main

ROOT = Path(__file__).resolve().parents[2]


def _scenario(tmp_path, example: str, deployment: str, num_requests: int) -> str:
    lines = []
    for line in (ROOT / "examples" / example).read_text().splitlines():
        if line.startswith("deployment:"):
            line = f"deployment: {deployment}"
        lines.append(re.sub(r"num_requests: \d+", f"num_requests: {num_requests}", line))
    path = tmp_path / "serve.yaml"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_the_header_of_a_static_run_names_its_batch_not_max_num_seqs(tmp_path, capsys):
    """batch_size 8 with max_num_seqs 64 ran batches of 8; the header read max_num_seqs 64."""
    path = _scenario(tmp_path, "serve-llama8b-chat.yaml", "{gpu: h100, weight_dtype: fp8, "
                     "batching: static, batch_size: 8, max_num_seqs: 64}", 64)
    code, out, _ = run(capsys, "simulate", "serve", path)
    header = out.splitlines()[0]
    assert code == 0 and ", static batches of 8, max_num_batched_tokens " in header
    assert "max_num_seqs" not in header and "(continuous batching)" not in header
    code, out, _ = run(capsys, "simulate", "serve", _scenario(
        tmp_path, "serve-llama8b-chat.yaml", "{gpu: h100, max_num_seqs: 64}", 64))
    assert re.search(r", max_num_seqs 64, max_num_batched_tokens [\d]+ \(continuous "
                     r"batching\); seed 0$", out.splitlines()[0])


def test_a_run_that_dropped_most_requests_says_so_first(tmp_path, capsys):
    """70B fp8 on one H100: a 272-token cache dropped 1,980 of 2,000 requests, exit 0, and
    -q read '2 output tok/s, p99 TTFT 0.0527 s, ...' as if healthy."""
    path = _scenario(tmp_path, "serve-llama70b-diurnal.yaml",
                     "{gpu: h100, tp: 1, weight_dtype: fp8}", 200)
    code, out, _ = run(capsys, "simulate", "serve", path)
    warning = out.splitlines()[1]
    assert code == 0 and warning.startswith("WARNING: ")
    match = re.search(r"(\d+) of 200 requests \((\d+)%\) were dropped, so the figures describe "
                      r"the (\d+) that completed: \d+ prompt \+ output longer than the KV cache "
                      r"holds \(272 tokens a replica; the mean request, prompt \+ output, "
                      r"needs ([\d,]+)\); to fix: .*raise deployment.tp", warning)
    assert match and int(match[1]) + int(match[3]) == 200 and int(match[1]) > 100
    assert int(match[4].replace(",", "")) > 272
    code, quiet, _ = run(capsys, "simulate", "serve", path, "-q")
    assert quiet.startswith(f"seed 0: {match[1]} of 200 requests dropped ({match[2]}%); ")
    code, js, _ = run(capsys, "simulate", "serve", path, "--json")
    assert '"notes": [\n    "' + warning.removeprefix("WARNING: ") in js


def test_quiet_and_report_show_long_latencies_in_a_unit_that_suits_them(tmp_path, capsys):
    """One sequence and one token a step: TTFT of hours read '1.42e+03 s' in -q and
    '4,908,236.6 ms' in the table; -q quoted the rate with the drain, the cost the rate
    while requests arrive, and left out the seed."""
    path = _scenario(tmp_path, "serve-llama8b-chat.yaml", "{gpu: h100, weight_dtype: fp8, "
                     "engine: sglang, max_num_seqs: 1, max_num_batched_tokens: 1}", 150)
    code, out, _ = run(capsys, "simulate", "serve", path)
    row = next(line for line in out.splitlines() if line.startswith("time to first token"))
    assert code == 0 and " ms" not in row and re.search(r"\d\.\d\d h|\d+ min|\d\.\d+ min", row)
    code, quiet, _ = run(capsys, "simulate", "serve", path, "-q")
    assert "e+" not in quiet
    assert re.match(r"seed 0: [\d,]+ output tok/s (while requests arrive|over the run), p99 "
                    r"TTFT [\d.]+ (min|h), p99 TPOT [\d.]+ ms, 0\.0% within SLOs$",
                    quiet.strip())


def test_the_report_and_the_library_json_lead_with_the_dropped_warning(tmp_path):
    """The warning was the CLI's alone: the report (and the web page, which shares its
    document) showed 'completed 20' without it."""
    import yaml

    from infraplan.report.document_serve import serving_document
    from infraplan.serving.scenario import ServeScenario

    path = _scenario(tmp_path, "serve-llama70b-diurnal.yaml",
                     "{gpu: h100, tp: 1, weight_dtype: fp8}", 200)
    scenario = ServeScenario.model_validate(yaml.safe_load(Path(path).read_text()))
    doc = serving_document(scenario, plan=False, sweep=False)
    scale = next(s for s in doc["sections"] if s["heading"] == "Scale")
    warnings = [p for p in scale["paragraphs"] if p.startswith("WARNING: ")]
    assert len(warnings) == 1 and "were dropped" in warnings[0]
    assert doc["simulation"]["notes"][0] == warnings[0].removeprefix("WARNING: ")
