"""Will it fit? The web view of `infraplan memory`: the scenario the CLI's flags build, the
JSON `memory --json` prints, and the document of report/document_memory.py that the page
renders as the reports do.

Every number is the library's (`training.fit_check`); nothing here computes memory.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BeforeValidator, Field, StrictBool

from infraplan.report.document_memory import memory_document
from infraplan.workloads import (PRECISION_DEFAULT, FinetuneMethod, GradDtype, Kernels,
                                 OptimizerName, Precision, Recompute)
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
    precision: Precision | None = Field(default=None, description=PRECISION_DEFAULT)
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


# The library's messages in the request's terms (see answers.in_request_terms)
MEMORY_TERMS = (
    (r"\b(?:parallelism|finetune) (sequence_parallel|recompute_fraction|lora_\w+)", r"\1"),
    (r"\bwith method (lora or qlora)", r"with finetune \1"),
    (r"\bfinetune\.method\b", "finetune"), (r"--(dp|precision)\b", r"\1"),
    (r"^(unknown accelerator|accelerator '.*' is not a catalog name)", r"gpu: \1"))


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
    return check.to_json(), memory_document(check)
