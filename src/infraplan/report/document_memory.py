"""Will it fit, as a document: the breakdown of `infraplan memory`, the fixes with what
each costs, the notes. The web page renders it (the fixes as the form's fields, each a
button) and so does `infraplan report` on a memory scenario (the fixes as scenario keys).

Every number is the library's (`training.fit_check`); nothing here computes memory.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from infraplan.report import figures as fig
from infraplan.report.document import item, section, table
from infraplan.units import GiB

# a fix is spelt as CLI flags ('--tp 2 --dp 4', '--sequence-parallel')
FLAG = re.compile(r"--([a-z][a-z-]*)(?: ([^-\s]\S*))?")


def _spelt(change: str, word: Callable[[str, str], str]) -> str:
    """A fix's flags, each spelt by word(knob, value; '' for a switch), comma-joined."""
    flags = FLAG.findall(change)
    return ", ".join(word(name.replace("-", "_"), value) for name, value in flags) \
        if flags else change


def in_form_terms(change: str) -> str:
    """A suggested fix ('--zero 2', '--sequence-parallel', '--tp 2 --dp 4') as the form's
    fields and values ('tp = 2, dp = 4')."""
    return _spelt(change, lambda knob, value: f"{knob} = {value or 'on'}")


def in_scenario_terms(change: str) -> str:
    """A suggested fix as the scenario keys that make it ('parallelism.tp: 2,
    parallelism.dp: 4'; '--finetune qlora' is 'finetune.method: qlora')."""
    from infraplan.training.fit_check import FLAG_PATHS

    return _spelt(change, lambda knob, value: f"{FLAG_PATHS[knob]}: {value or 'true'}")


# The knobs a fix can change, where the report keeps them; the form names them alike
FIX_KNOBS = (("plan", ("tp", "pp", "dp", "zero", "recompute", "recompute_fraction",
                       "sequence_parallel", "micro_batch")),
             ("options", ("finetune", "optimizer", "kernels")))


def fix_fields(before, after) -> dict[str, str]:
    """The form's values that turn report `before` into the fix `after` (a doubled tp or pp
    halves dp, so both are set), spelt as the form's inputs take them."""
    changed = {}
    for where, names in FIX_KNOBS:
        for name in names:
            value = getattr(getattr(after, where), name)
            if value != getattr(getattr(before, where), name):
                changed[name] = (str(value).lower() if isinstance(value, bool) else
                                 f"{value:g}" if isinstance(value, float) else str(value))
    return changed


def _gib(n_bytes: float) -> str:
    return f"{n_bytes / GiB:,.1f} GiB"


def _bar(label: str, r) -> dict:
    return {"label": label, "weights_bytes": r.weights_bytes,
            "gradients_bytes": r.gradients_bytes, "optimizer_bytes": r.optimizer_bytes,
            "activations_bytes": r.activations_bytes, "overhead_bytes": r.overhead_bytes,
            "total_bytes": r.total_bytes, "capacity_bytes": r.capacity_bytes}


def memory_document(check, *, phrase: Callable[[str], str] = in_form_terms, title: str = "",
                    description: str = "") -> dict:
    """The sections of a fit check (training.fit_check.FitCheck): the verdict and
    breakdown, the fixes (its heading says whether they are single changes or pairs;
    `phrase` spells each, by default as the web form's fields), the notes."""
    r, fixes, min_gpus = check.report, check.fixes, check.min_gpus_for_model_states
    fixes_heading, plan, capacity = check.fixes_heading, r.plan, r.capacity_bytes
    label = f"{plan.num_gpus:,} x {r.accelerator}"
    bars = [_bar(label, r)] + [_bar(f"with {phrase(c)}", f) for c, f in fixes]
    parts = [("weights", r.weights_bytes), ("gradients", r.gradients_bytes),
             ("optimizer states", r.optimizer_bytes), ("activations", r.activations_bytes),
             *((f"overhead: {k}", v) for k, v in r.overhead_items() if v > 0)]
    rows = [[name, f"{v / GiB:,.2f}", f"{v / capacity:.1%}"] for name, v in parts]
    rows.append(["total", f"{r.total_bytes / GiB:,.2f}", f"{r.total_bytes / capacity:.1%}"])
    # the difference of the two figures as shown, so that the page's arithmetic adds up
    # (61.0 of 79.6 GiB read '18.7 GiB to spare')
    shown = round(capacity / GiB, 1) - round(r.total_bytes / GiB, 1)
    spare = (f"{abs(shown):,.1f} GiB to spare" if r.fits else f"{abs(shown):,.1f} GiB over")
    fit = section("Memory", "Will it fit?", items=[
        item("verdict", r.fits, "fits" if r.fits else "DOES NOT FIT"),
        item("memory per accelerator", r.total_bytes,
             f"{_gib(r.total_bytes)} of {_gib(capacity)}"),
        item("headroom", r.headroom_bytes, spare),
        item("accelerators", plan.num_gpus, label),
        item("parallel layout", plan.describe(), plan.describe()),
        item("job", r.job_summary(), r.job_summary()),
        item("parameters", r.params_total, f"{r.params_total:,}" + (
            f" ({r.params_active:,} active)" if r.params_active != r.params_total else "")),
        item("parameters per accelerator before ZeRO sharding", r.params_per_gpu,
             f"{r.params_per_gpu:,.0f} ({r.trainable_params_per_gpu:,.0f} trainable)"),
        item("micro-batches per step", r.num_microbatches, f"{r.num_microbatches:,}"),
        item("fewest accelerators for the model states", min_gpus, f"{min_gpus:,}")],
        tables=[table(f"memory per accelerator (pipeline rank {r.pipeline_rank}, the "
                      "fullest)", ["component", "GiB", "share of usable"], rows)],
        figures=["memory"])
    sections = [fit]
    if not r.fits:
        states = (f"The model states alone need at least {min_gpus:,} x {r.accelerator} "
                  "(fully sharded, before activations).")
        sections.append(section(
            "Memory", "Fixes",
            tables=[table(fixes_heading[0].lower() + fixes_heading[1:],
                          ["change", "total GiB", "share of usable"],
                          [[phrase(c), f"{f.total_bytes / GiB:,.2f}",
                            f"{f.total_bytes / capacity:.1%}"] for c, f in fixes])]
            if fixes else (),
            paragraphs=([] if fixes else [fixes_heading + "."]) + [states]))
    if r.notes:
        sections.append(section("Memory", "Notes", paragraphs=list(r.notes)))
    apply = [{"label": phrase(c), "fields": fix_fields(r, f)} for c, f in fixes]
    return fig.json_safe({"kind": "memory", "title": title or f"{r.model} memory",
                          "description": description, "model": r.model,
                          "memory": bars, "sections": sections, "apply": apply,
                          "figures": {"memory": fig.memory_figure(bars)}})
