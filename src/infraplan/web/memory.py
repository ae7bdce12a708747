"""Will it fit? The web view of `infraplan memory`: the scenario the CLI's flags build, the
JSON `memory --json` prints, and a small document (items, tables, the memory figure) that
the page renders as the reports do.

Every number is the library's (`memory_for_scenario`, `suggest_fixes`,
`min_gpus_for_states`); nothing here computes memory.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BeforeValidator, Field, StrictBool

from infraplan.report import figures as fig
from infraplan.report.document import item, section, table
from infraplan.units import GiB
from infraplan.workloads import (FinetuneMethod, GradDtype, Kernels, OptimizerName, Precision,
                                 Recompute)
from infraplan.web.fields import Count, ModelPick, Number, json_number

MAX_JOB_GPUS = 1 << 17  # accelerators in one memory check (workloads.MAX_ACCELERATORS)


class MemoryRequest(ModelPick):
    """Will one training or fine-tuning plan fit: `infraplan memory`, a field a flag."""

    gpu: str = Field(max_length=100, description="accelerator name or alias ('h100')")
    num_gpus: Count = Field(default=1, ge=1, le=MAX_JOB_GPUS, description="accelerators")
    tp: Count = Field(default=1, ge=1, le=MAX_JOB_GPUS, description="tensor parallel")
    pp: Count = Field(default=1, ge=1, le=MAX_JOB_GPUS, description="pipeline stages")
    dp: Count | None = Field(default=None, ge=1, le=MAX_JOB_GPUS,
                             description="data parallel (default: num_gpus / (tp*pp*cp))")
    cp: Count = Field(default=1, ge=1, le=MAX_JOB_GPUS, description="context parallel")
    ep: Count = Field(default=1, ge=1, le=MAX_JOB_GPUS, description="expert parallel")
    etp: Count | None = Field(default=None, ge=1, le=MAX_JOB_GPUS,
                              description="the routed experts' tensor parallel (default: tp)")
    vp: Count = Field(default=1, ge=1, le=MAX_JOB_GPUS,
                      description="virtual pipeline stages per rank (interleaved 1F1B)")
    zero: Annotated[Literal[0, 1, 2, 3], BeforeValidator(json_number)] = Field(
        default=0, description="ZeRO stage (3 = FSDP)")
    recompute: Recompute = "none"
    recompute_fraction: Number | None = Field(
        default=None, gt=0, le=1, description="with recompute full: share of each stage's "
                                              "layers recomputed (the rest selective)")
    sequence_parallel: StrictBool = False
    micro_batch: Count = Field(default=1, ge=1, le=1 << 30,
                               description="sequences per micro-batch")
    global_batch: Count | None = Field(default=None, ge=1, le=1 << 30,
                                       description="sequences per optimizer step")
    seq_len: Count = Field(default=4096, ge=1, le=1 << 27, description="tokens per sequence")
    precision: Precision = "bf16"
    grad_dtype: GradDtype | None = Field(
        default=None, description="fp32 = Megatron-LM main grads (default: the precision)")
    optimizer: OptimizerName = "adamw"
    kernels: Kernels = Field(
        default="fused", description="fused: flash attention and fused norms; eager: plain "
                                     "PyTorch ops with the s x s attention scores")
    finetune: FinetuneMethod = "full"
    lora_rank: Count | None = Field(default=None, ge=1, le=1 << 16)
    lora_targets: list[Annotated[str, Field(min_length=1, max_length=50)]] | None = Field(
        default=None, min_length=1, max_length=32,
        description="all-linear, attention, mlp, or module names (q_proj, ...)")


# The library's messages in the request's terms (see api._in_request_terms)
MEMORY_TERMS = (
    (r"\b(?:parallelism|finetune) (sequence_parallel|recompute_fraction|lora_\w+)", r"\1"),
    (r"\bwith method (lora or qlora)", r"with finetune \1"),
    (r"\bfinetune\.method\b", "finetune"), (r"--(dp|precision)\b", r"\1"),
    (r"^(unknown accelerator|accelerator '.*' is not a catalog name)", r"gpu: \1"),
    (r"^(unknown model|model '.*' is not a catalog name)", r"model: \1"))


FLAG = re.compile(r"--([a-z][a-z-]*)(?: ([^-\s]\S*))?")


def memory_scenario(req, model: str, gpu: str):
    """The MemoryScenario `infraplan memory --model ... --gpu ...` builds from the same
    values (a field left None is a flag not given)."""
    from infraplan.training.fit_check import FLAG_PATHS, scenario_from_flags

    values = {name: getattr(req, name, None) for name in FLAG_PATHS}
    values.update(model=model, gpu=gpu,
                  sequence_parallel=req.sequence_parallel or None)  # a store_true flag
    return scenario_from_flags(values, "request")


def memory_answer(scenario, arch=None) -> tuple[dict, dict]:
    """(what `infraplan memory --json` prints, the page's document) of a scenario; `arch`
    is an uploaded config's architecture, planned in place of a catalog model."""
    from infraplan.training.fit_check import fit_check

    check = fit_check(scenario, arch)
    return check.to_json(), memory_document(check.report, check.fixes,
                                            check.min_gpus_for_model_states,
                                            check.fixes_heading)


def in_form_terms(change: str) -> str:
    """A suggested fix ('--zero 2', '--sequence-parallel', '--tp 2 --dp 4') as the form's
    fields and values ('tp = 2, dp = 4')."""
    flags = FLAG.findall(change)
    return ", ".join(f"{name.replace('-', '_')} = {value or 'on'}"
                     for name, value in flags) if flags else change


# The knobs a fix can change, where the report keeps them; the form names them alike
FIX_KNOBS = (("plan", ("tp", "pp", "dp", "zero", "recompute", "sequence_parallel",
                       "micro_batch")), ("options", ("finetune", "optimizer")))


def fix_fields(before, after) -> dict[str, str]:
    """The form's values that turn report `before` into the fix `after` (a doubled tp or pp
    halves dp, so both are set), spelt as the form's inputs take them."""
    changed = {}
    for where, names in FIX_KNOBS:
        for name in names:
            value = getattr(getattr(after, where), name)
            if value != getattr(getattr(before, where), name):
                changed[name] = str(value).lower() if isinstance(value, bool) else str(value)
    return changed


def _gib(n_bytes: float) -> str:
    return f"{n_bytes / GiB:,.1f} GiB"


def _bar(label: str, r) -> dict:
    return {"label": label, "weights_bytes": r.weights_bytes,
            "gradients_bytes": r.gradients_bytes, "optimizer_bytes": r.optimizer_bytes,
            "activations_bytes": r.activations_bytes, "overhead_bytes": r.overhead_bytes,
            "total_bytes": r.total_bytes, "capacity_bytes": r.capacity_bytes}


def memory_document(report, fixes, min_gpus: int,
                    fixes_heading: str = "Single changes that fit") -> dict:
    """The page's sections: the verdict and breakdown, the fixes (`fixes_heading` says
    whether they are single changes or pairs), the notes."""
    r, plan, capacity = report, report.plan, report.capacity_bytes
    label = f"{plan.num_gpus:,} x {r.accelerator}"
    bars = [_bar(label, r)] + [_bar(f"with {in_form_terms(c)}", f) for c, f in fixes]
    parts = [("weights", r.weights_bytes), ("gradients", r.gradients_bytes),
             ("optimizer states", r.optimizer_bytes), ("activations", r.activations_bytes),
             *((f"overhead: {k.replace('_', ' ')}", v) for k, v in r.overhead_parts.items()
               if v > 0)]
    rows = [[name, f"{v / GiB:,.2f}", f"{v / capacity:.1%}"] for name, v in parts]
    rows.append(["total", f"{r.total_bytes / GiB:,.2f}", f"{r.total_bytes / capacity:.1%}"])
    spare = (f"{_gib(r.headroom_bytes)} to spare" if r.fits
             else f"{_gib(-r.headroom_bytes)} over")
    fit = section("Memory", "Will it fit?", items=[
        item("verdict", r.fits, "fits" if r.fits else "DOES NOT FIT"),
        item("memory per accelerator", r.total_bytes,
             f"{_gib(r.total_bytes)} of {_gib(capacity)}"),
        item("headroom", r.headroom_bytes, spare),
        item("accelerators", plan.num_gpus, label),
        item("parallel layout", plan.describe(), plan.describe()),
        item("parameters", r.params_total, f"{r.params_total:,}" + (
            f" ({r.params_active:,} active)" if r.params_active != r.params_total else "")),
        item("parameters per accelerator", r.params_per_gpu,
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
                          [[in_form_terms(c), f"{f.total_bytes / GiB:,.2f}",
                            f"{f.total_bytes / capacity:.1%}"] for c, f in fixes])]
            if fixes else (),
            paragraphs=([] if fixes else [fixes_heading + "."]) + [states]))
    if r.notes:
        sections.append(section("Memory", "Notes", paragraphs=list(r.notes)))
    apply = [{"label": in_form_terms(c), "fields": fix_fields(r, f)} for c, f in fixes]
    return fig.json_safe({"kind": "memory", "title": f"{r.model} memory", "model": r.model,
                          "memory": bars, "sections": sections, "apply": apply,
                          "figures": {"memory": fig.memory_figure(bars)}})
