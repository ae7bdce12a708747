"""Will this training or fine-tuning job fit? The per-accelerator memory of one plan."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from infraplan.catalog import load_catalog
from infraplan.catalog.schema import Accelerator
from infraplan.errors import InputError
from infraplan.models import load_model, param_counts
from infraplan.models.arch import ModelArch
from infraplan.physics.memory import activations as act
from infraplan.physics.memory.states import optimizer as lookup_optimizer
from infraplan.physics.memory.training import (FINETUNE, RECOMPUTE, MemoryOptions,
                                               training_memory_arrays)
from infraplan.training.plan import ParallelPlan, check_plan

PRECISIONS = ("bf16", "fp16", "fp8", "fp32")


@dataclass(frozen=True)
class MemoryReport:
    model: str
    accelerator: str
    plan: ParallelPlan
    options: MemoryOptions
    params_total: int
    params_active: int
    params_per_gpu: float
    trainable_params_per_gpu: float
    weights_bytes: float
    gradients_bytes: float
    optimizer_bytes: float
    activations_bytes: float
    overhead_bytes: float
    total_bytes: float
    capacity_bytes: float
    pipeline_rank: int
    num_microbatches: int
    overhead_parts: dict[str, float] = field(default_factory=dict)
    notes: tuple[str, ...] = field(default=())

    @property
    def fits(self) -> bool:
        return self.total_bytes <= self.capacity_bytes

    @property
    def headroom_bytes(self) -> float:
        return self.capacity_bytes - self.total_bytes

    def to_json(self) -> dict:
        return {
            "model": self.model, "accelerator": self.accelerator,
            "num_gpus": self.plan.num_gpus, "plan": asdict(self.plan),
            "options": asdict(self.options),
            "params_total": self.params_total, "params_active": self.params_active,
            "params_per_gpu": round(self.params_per_gpu),
            "trainable_params_per_gpu": round(self.trainable_params_per_gpu),
            "weights_bytes": round(self.weights_bytes),
            "gradients_bytes": round(self.gradients_bytes),
            "optimizer_bytes": round(self.optimizer_bytes),
            "activations_bytes": round(self.activations_bytes),
            "overhead_bytes": round(self.overhead_bytes),
            "overhead_parts_bytes": {k: round(v) for k, v in self.overhead_parts.items()},
            "total_bytes": round(self.total_bytes),
            "capacity_bytes": round(self.capacity_bytes),
            "fits": self.fits, "headroom_bytes": round(self.headroom_bytes),
            "pipeline_rank": self.pipeline_rank, "num_microbatches": self.num_microbatches,
            "notes": list(self.notes),
        }


def _check_options(options: MemoryOptions, gpu: Accelerator) -> list[str]:
    notes = []
    if options.precision not in PRECISIONS:
        raise InputError(f"precision must be one of {', '.join(PRECISIONS)}, got "
                         f"{options.precision!r}")
    if options.kernels not in act.KERNELS:
        raise InputError(f"kernels must be one of {', '.join(act.KERNELS)}, got "
                         f"{options.kernels!r}")
    if options.finetune not in FINETUNE:
        raise InputError(f"finetune must be one of {', '.join(FINETUNE)}, got "
                         f"{options.finetune!r}")
    if options.grad_dtype not in (None, "fp32", "bf16", "fp16"):
        raise InputError(f"grad_dtype must be fp32, bf16 or fp16, got {options.grad_dtype!r}")
    lookup_optimizer(options.optimizer)
    if options.seq_len < 1:
        raise InputError(f"seq_len must be >= 1, got {options.seq_len}")
    if options.finetune != "full" and options.lora_rank < 1:
        raise InputError(f"lora_rank must be >= 1, got {options.lora_rank}")
    needed = {"bf16": "bf16", "fp16": "fp16", "fp8": "fp8", "fp32": "fp32"}[options.precision]
    if needed not in gpu.peak_flops:
        if options.precision == "fp8":
            notes.append(f"{gpu.name} has no fp8 tensor cores: fp8 training is emulated or "
                         "unavailable there")
        else:
            alt = "fp16" if "fp16" in gpu.peak_flops else "fp32"
            raise InputError(f"{gpu.name} does not support {options.precision}",
                             fix=f"use --precision {alt}")
    return notes


def training_memory(model: str | ModelArch, gpu: str | Accelerator, plan: ParallelPlan,
                    options: MemoryOptions, *, global_batch: int | None = None) -> MemoryReport:
    """Memory per accelerator of one plan, at its fullest pipeline rank.

    `global_batch` (sequences per optimizer step) sets the micro-batches per step; without
    it the pipeline is assumed full (at least pp micro-batches).
    """
    arch = model if isinstance(model, ModelArch) else load_model(model)
    accelerator = gpu if isinstance(gpu, Accelerator) else load_catalog().accelerators.get(gpu)
    notes = _check_options(options, accelerator)
    m = check_plan(arch, plan, seq_len=options.seq_len, global_batch=global_batch,
                   kernels=options.kernels)
    if options.seq_len > arch.max_position_embeddings:
        notes.append(f"seq_len {options.seq_len} exceeds the model's "
                     f"max_position_embeddings {arch.max_position_embeddings}")
    out = training_memory_arrays(
        arch, options, tp=plan.tp, pp=plan.pp, dp=plan.dp, cp=plan.cp, ep=plan.ep,
        zero=plan.zero, vp=plan.vp, sequence_parallel=plan.sequence_parallel,
        micro_batch=plan.micro_batch, num_microbatches=m,
        recompute=RECOMPUTE.index(plan.recompute))
    counts = param_counts(arch)
    value = {k: float(np.asarray(v)) for k, v in out.items()}
    return MemoryReport(
        model=arch.name, accelerator=accelerator.name, plan=plan, options=options,
        params_total=counts.total, params_active=counts.active,
        params_per_gpu=value["params_per_gpu"],
        trainable_params_per_gpu=value["trainable_per_gpu"],
        weights_bytes=value["weights"], gradients_bytes=value["gradients"],
        optimizer_bytes=value["optimizer"], activations_bytes=value["activations"],
        overhead_bytes=value["overhead"], total_bytes=value["total"],
        capacity_bytes=accelerator.memory_bytes, pipeline_rank=int(value["rank"]),
        num_microbatches=m, notes=tuple(notes),
        overhead_parts={k.split(".", 1)[1]: v for k, v in value.items()
                        if k.startswith("overhead.")})
