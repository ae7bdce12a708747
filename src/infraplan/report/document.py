"""One scenario's numbers and figures as a document: a JSON-ready dict organised under the
SCALE headings (Scale, Compute, Accelerator interconnect, Latency & locality, Economics)
and the DEPLOY checklist (Define workload, Estimate throughput, Pick platform, Load-test,
Observe, Yield plan). The HTML report and the web UI render the same dict.

    doc = build_document("examples/train-llama-3.1-70b.yaml")
    doc["sections"][0]["heading"], doc["figures"].keys()

A section holds `items` (label, raw SI value, the text shown), `tables` (columns, rows of
text), `figures` (keys into doc["figures"]), `paragraphs`, or, when it has nothing,
`not_applicable` saying why.
"""

from __future__ import annotations

import math
from pathlib import Path

from infraplan.errors import InputError
from infraplan.files import read_user_file
from infraplan.units import run_length, sig3

SCALE = ("Scale", "Compute", "Accelerator interconnect", "Latency & locality", "Economics")
DEPLOY = ("Define workload", "Estimate throughput", "Pick platform", "Load-test", "Observe",
          "Yield plan")
NOT_APPLICABLE = "not applicable to this scenario"


def item(label: str, value, text: str) -> dict:
    """One number: `value` raw (SI units, as the library returns it), `text` as shown."""
    return {"label": label, "value": value, "text": text}


def table(title: str, columns: list[str], rows: list[list], notes=()) -> dict:
    """A table; `notes` are sentences shown right under it (what its figures count and
    how they relate to the section's others)."""
    out = {"title": title, "columns": columns, "rows": [[str(c) for c in r] for r in rows]}
    if notes:
        out["notes"] = list(notes)
    return out


def section(framework: str, heading: str, *, items=(), tables=(), figures=(), paragraphs=(),
            not_applicable: str | None = None) -> dict:
    """A heading's content; an empty one says it is not applicable (and why, if given)."""
    empty = not (items or tables or figures or paragraphs)
    reason = None
    if empty or not_applicable:
        reason = NOT_APPLICABLE + (f": {not_applicable}" if not_applicable else "")
    return {"framework": framework, "heading": heading, "items": list(items),
            "tables": list(tables), "figures": list(figures), "paragraphs": list(paragraphs),
            "not_applicable": reason}


def ordered(sections: dict[str, dict]) -> list[dict]:
    """Every SCALE and DEPLOY heading in order; a heading nobody filled is not applicable."""
    out = []
    for framework, headings in (("SCALE", SCALE), ("DEPLOY", DEPLOY)):
        for heading in headings:
            out.append(sections.get(heading) or section(framework, heading))
    return out


def days(seconds: float | None) -> str:
    return "-" if seconds is None else run_length(seconds, " days")


def ms(seconds: float | None) -> str:
    """A latency: milliseconds under 10 s ('262.4 ms'), seconds from there ('17.9 s', not
    '17,938.0 ms')."""
    if seconds is None or math.isnan(seconds):
        return "-"
    if abs(round(seconds * 1e3, 1)) >= 10_000:  # 9.99996 s too: not '10,000.0 ms'
        return f"{seconds:,.1f} s"
    return f"{seconds * 1e3:,.1f} ms"


def ms_column(values) -> list[str]:
    """Latencies that share a column (or a row): all in milliseconds as ms() prints them,
    or, when one of them ms() would print in seconds, all in seconds ('7.4 s' beside
    '15.0 s', not '7,399.7 ms')."""
    def missing(v):
        return v is None or math.isnan(v)

    shown = [v for v in values if not missing(v)]
    if not any(abs(round(v * 1e3, 1)) >= 10_000 for v in shown):
        return [ms(v) for v in values]
    places = 1 if all(abs(v) >= 1 or v == 0 for v in shown) else 3
    return ["-" if missing(v) else f"{v:,.{places}f} s" for v in values]


def limit_ms(seconds: float) -> str:
    """A latency limit as written, without padding: '2,000 ms', '50 ms', '12.5 s'."""
    if seconds >= 10:
        return f"{seconds:,.6g} s"
    return f"{seconds * 1e3:,.6g} ms"


def size_text(size_bytes: float) -> str:
    """Bytes to 3 significant figures in SI units (GB = 1e9 bytes): '23.1 GB', '5.69 TB'."""
    for unit, scale in (("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6)):
        if size_bytes >= scale:
            return f"{sig3(size_bytes / scale)} {unit}"
    return f"{sig3(size_bytes)} bytes"


def usd(value: float | None) -> str:
    """Dollars: cents under $1,000 ('$2.69'), whole dollars from there ('$1,577,734')."""
    if value is None:
        return "-"
    if value and abs(value) < 0.01:  # a short run's cost: '$0.00212', not '$0.00'
        return f"${value:.3g}"
    return f"${value:,.0f}" if abs(value) >= 1000 else f"${value:,.2f}"


def scenario_kind(raw: dict, origin: str) -> str:
    """'training', 'serving' or 'memory', from the keys of a scenario mapping."""
    if not isinstance(raw, dict):
        raise InputError(f"{origin}: expected a mapping of keys (model, training, hardware, "
                         "... or model, traffic, ...)")
    hardware = raw.get("hardware")
    if "traffic" in raw:
        return "serving"
    if "training" in raw and isinstance(hardware, dict) and "gpus" in hardware:
        return "training"
    if "training" in raw and isinstance(hardware, dict) and "gpu" in hardware:
        return "memory"
    raise InputError(f"{origin}: neither a training scenario (keys training and hardware."
                     "gpus), a memory scenario (training and hardware.gpu) nor a serving "
                     "scenario (key traffic)",
                     fix="start from examples/train-*.yaml, examples/memory-*.yaml or "
                         "examples/serve-*.yaml")


def build_document(scenario_path: str | Path, progress=None, seed: int | None = None) -> dict:
    """Read a training, memory or serving scenario, run the library's plan (simulation,
    memory check), and return the document; `progress(done, total)` follows the plan
    search. `seed` replaces a serving scenario's `seed` (the others draw nothing at
    random)."""
    path = Path(scenario_path)
    text = read_user_file(path, "scenario file",
                          fix="give the path of a scenario YAML (see examples/)")
    from infraplan.scenario_files import parse_yaml, scenario_from

    raw = parse_yaml(text, path.name)
    if raw is None:
        scenario_from(raw, path)  # raises the empty-file error
    kind = scenario_kind(raw, path.name)
    # a training report draws at random only the runs of its run: block (simulate train's)
    draws = kind == "serving" or kind == "training" and isinstance(raw, dict) and "run" in raw
    if not draws and seed is not None:
        raise InputError(f"--seed: a {kind} report draws nothing at random",
                         fix="drop --seed" + ("; a training report draws the Monte-Carlo runs "
                                              "of simulate train when the scenario has a run: "
                                              "block" if kind == "training" else ""))
    if kind == "memory":
        from infraplan.report.document_memory import in_scenario_terms, memory_document
        from infraplan.training.fit_check import fit_check
        from infraplan.workloads import MemoryScenario

        scenario = scenario_from(raw, path, MemoryScenario)
        check = fit_check(scenario)
        return memory_document(check, phrase=in_scenario_terms, title=scenario.name,
                               description=scenario.description)
    if kind == "training":
        from infraplan.report.document_train import training_document
        from infraplan.training.plan_train import plan_training
        from infraplan.workloads import TrainScenario

        scenario = scenario_from(raw, path, TrainScenario,
                                 None if seed is None else {"run.seed": seed})
        return training_document(scenario, plan_training(scenario, progress=progress))
    from infraplan.report.document_serve import serving_document
    from infraplan.serving.scenario import ServeScenario

    scenario = scenario_from(raw, path, ServeScenario, None if seed is None else {"seed": seed})
    return serving_document(scenario, base_dir=path.parent, progress=progress)
