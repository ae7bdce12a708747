"""Will this training or fine-tuning job fit? The per-accelerator memory of one plan."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from infraplan.catalog import load_catalog
from infraplan.catalog.schema import Accelerator
from infraplan.errors import InputError, PlanError
from infraplan.models import load_model, param_counts, uncounted_notes
from infraplan.models.arch import ModelArch
from infraplan.physics import hardware
from infraplan.physics.memory import activations as act
from infraplan.physics.memory.states import expert_dp, lora_shapes, lora_targets
from infraplan.physics.memory.states import optimizer as lookup_optimizer
from infraplan.physics.memory.training import (FINETUNE, MemoryOptions,
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
    arch: ModelArch | None = field(default=None, repr=False, compare=False)

    @property
    def fits(self) -> bool:
        return self.total_bytes <= self.capacity_bytes

    @property
    def headroom_bytes(self) -> float:
        return self.capacity_bytes - self.total_bytes

    def job_summary(self) -> str:
        """The job the memory is for, in a line: 'seq 4,096, 16 micro-batch(es) per step,
        bf16, adamw, qlora rank 64, fused kernels'."""
        o = self.options
        return (f"seq {o.seq_len:,}, {self.num_microbatches:,} micro-batch(es) per step, "
                f"{o.precision}, {o.optimizer}"
                + (f", grads {o.grad_dtype}" if o.grad_dtype else "")
                + (f", {o.finetune} rank {o.lora_rank}" if o.finetune != "full" else "")
                + f", {o.kernels} kernels")

    def overhead_items(self) -> list[tuple[str, float]]:
        """The overhead's parts in words, the runtime's context named after the chip's
        vendor (the catalog's figure is a CUDA context's; a TPU's is no 'cuda context')."""
        vendor = load_catalog().accelerators.get(self.accelerator).vendor
        context = {"nvidia": "CUDA context", "amd": "ROCm context"}.get(vendor,
                                                                        "runtime context")
        return [(context if k == "cuda_context" else k.replace("_", " "), v)
                for k, v in self.overhead_parts.items()]

    def _options_json(self) -> dict:
        """The options, the LoRA ones null when no adapter is trained (finetune full)."""
        out = asdict(self.options)
        if self.options.finetune == "full":
            out.update(lora_rank=None, lora_targets=None)
        return out

    def to_json(self) -> dict:
        return {
            "model": self.model, "accelerator": self.accelerator,
            "num_gpus": self.plan.num_gpus, "plan": asdict(self.plan),
            "options": self._options_json(),
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


def check_precision(precision: str) -> str:
    """`precision` if a training step runs in it; else an InputError naming the choices."""
    if precision not in PRECISIONS:
        raise InputError(f"precision must be one of {', '.join(PRECISIONS)}, got "
                         f"{precision!r}")
    return precision


def _check_options(options: MemoryOptions, gpu: Accelerator) -> list[str]:
    notes = []
    check_precision(options.precision)
    if options.kernels not in act.KERNELS:
        raise InputError(f"kernels must be one of {', '.join(act.KERNELS)}, got "
                         f"{options.kernels!r}")
    if options.finetune not in FINETUNE:
        raise InputError(f"finetune must be one of {', '.join(FINETUNE)}, got "
                         f"{options.finetune!r}")
    if options.grad_dtype not in (None, "fp32", "bf16", "fp16"):
        raise InputError(f"grad_dtype must be fp32, bf16 or fp16, got {options.grad_dtype!r}")
    lookup_optimizer(options.optimizer)
    if options.finetune == "qlora" and options.precision == "fp8":
        # bitsandbytes' Linear4bit dequantizes NF4 to its compute dtype, bf16 or fp16
        # (bnb_4bit_compute_dtype); no QLoRA stack runs its GEMMs in fp8
        raise InputError("precision=fp8 does not apply to finetune=qlora: its 4-bit layers "
                         "(bitsandbytes) compute in bf16 or fp16",
                         fix="use precision=bf16 (or fp16), or finetune=lora with fp8")
    if options.seq_len < 1:
        raise InputError(f"seq_len must be >= 1, got {options.seq_len}")
    if options.finetune != "full" and options.lora_rank < 1:
        raise InputError(f"lora_rank must be >= 1, got {options.lora_rank}")
    needed = {"bf16": "bf16", "fp16": "fp16", "fp8": "fp8", "fp32": "fp32"}[options.precision]
    if needed not in gpu.peak_flops:
        # as plan train refuses it (evaluate.check_precision_peak): fp8 training needs fp8
        # tensor cores (Transformer Engine), which A100, V100 and T4 lack
        alt = next(p for p in ("bf16", "fp16", "fp32") if p in gpu.peak_flops)
        units = "matrix units" if gpu.vendor == "google" else "tensor cores"
        raise InputError(f"{gpu.name} does not support {options.precision} training: it has "
                         f"no {options.precision} {units}",
                         fix=f"use --precision {alt}")
    return notes


def model_notes(arch: ModelArch, seq_len: int) -> list[str]:
    """What the numbers leave out: sequences past the positions the model was configured
    for (the numbers still follow, but the model was not trained at that length), and a
    multimodal checkpoint's encoders (only its language model is planned)."""
    notes = [] if seq_len <= arch.max_position_embeddings else [
        f"seq_len {seq_len} exceeds the model's max_position_embeddings "
        f"{arch.max_position_embeddings}"]
    return notes + uncounted_notes(arch)


def lora_coverage_notes(arch: ModelArch, options: MemoryOptions) -> list[str]:
    """A LoRA fine-tune's targets must adapt some weight of this model. Routed experts are
    never adapted: Hugging Face transformers 5 stores them fused, as 3-D parameters
    (e.g. `MixtralExperts.gate_up_proj`), which PEFT's `target_modules` does not reach. On
    an MoE model, MLP targets therefore adapt only dense layers and shared experts."""
    if options.finetune == "full":
        return []
    targets = lora_targets(options.lora_targets)
    kinds = [(False, arch.num_dense_layers), (True, arch.num_moe_layers)]
    adapted = sum(count * len(lora_shapes(arch, targets, moe_layer))
                  for moe_layer, count in kinds if count)
    mlp_targets = targets & {"gate", "up", "down"}
    if adapted == 0:
        raise InputError(
            f"finetune.lora_targets [{', '.join(options.lora_targets)}] adapt no weight "
            f"of {arch.name}: its MLPs are routed experts, stored fused in Hugging Face "
            "transformers, which LoRA's target modules do not reach",
            fix="set lora_targets: [attention], or lora_targets: [all-linear] (attention "
                "and any dense or shared-expert MLPs)")
    if not (arch.is_moe and mlp_targets):
        return []
    mlp_adapted = sum(count * len(lora_shapes(arch, frozenset(mlp_targets), moe_layer))
                      for moe_layer, count in kinds if count)
    reach = ("only dense layers and shared experts" if mlp_adapted else
             "nothing: it has no dense or shared-expert MLP")
    return [f"LoRA does not adapt the routed experts of {arch.name} (fused 3-D weights in "
            f"transformers); its MLP targets adapt {reach}"]


def zero_notes(arch: ModelArch, plan: ParallelPlan) -> list[str]:
    """ZeRO shards over the data-parallel ranks (DP x CP): with one of them it shards
    nothing (PyTorch FSDP runs NO_SHARD at world size 1), so the stage saves no memory."""
    if plan.zero == 0 or plan.dp * plan.cp > 1:
        return []
    experts = arch.is_moe and float(expert_dp(plan.tp, plan.dp, plan.cp, plan.expert_tp,
                                              plan.ep)) > 1
    what = "only the routed experts' states" if experts else "nothing"
    return [f"ZeRO-{plan.zero} with one data-parallel rank (dp*cp = 1) shards {what}: each "
            "accelerator keeps its whole model states; ZeRO saves memory with dp > 1"]


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
                   kernels=options.kernels, gpus_fixed=True)
    notes += model_notes(arch, options.seq_len)
    notes += lora_coverage_notes(arch, options)
    layout = plan.uneven_layout_note(arch.num_layers)
    notes += [layout] if layout else []
    notes += zero_notes(arch, plan)
    out = training_memory_arrays(
        arch, options, tp=plan.tp, pp=plan.pp, dp=plan.dp, cp=plan.cp, ep=plan.ep,
        etp=plan.expert_tp, zero=plan.zero, vp=plan.vp,
        sequence_parallel=plan.sequence_parallel,
        micro_batch=plan.micro_batch, num_microbatches=m,
        recompute=plan.recompute_code, ep_overlap=float(plan.ep_comm_overlap))
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
        num_microbatches=m, notes=tuple(notes), arch=arch,
        overhead_parts={k.split(".", 1)[1]: v for k, v in value.items()
                        if k.startswith("overhead.")})


def memory_for_scenario(scenario, arch: ModelArch | None = None) -> MemoryReport:
    """The memory report of a `workloads.MemoryScenario` (of `arch` instead of the model it
    names, when given: an uploaded config.json)."""
    from infraplan.training.plan import resolve_dp

    par, job, ft = scenario.parallelism, scenario.training, scenario.finetune
    if not scenario.hardware.gpu.strip():
        raise InputError("hardware.gpu is empty: it names the accelerator",
                         fix="set hardware.gpu: h100 (a name or alias; 'infraplan catalog "
                             "gpus' lists them)")
    plan = ParallelPlan(tp=par.tp, pp=par.pp, dp=1, cp=par.cp, ep=par.ep, etp=par.etp,
                        vp=par.vp,
                        zero=par.zero, sequence_parallel=par.sequence_parallel,
                        micro_batch=par.micro_batch, recompute=par.recompute,
                        recompute_fraction=par.recompute_fraction)
    try:
        dp = resolve_dp(scenario.hardware.num_gpus, par.tp, par.pp, par.cp, par.dp)
    except PlanError:
        # a degree the model refuses (tp=3 on 64 heads) first: a GPU count fixed for it
        # would only meet that error next
        check_plan(arch or load_model(scenario.model), plan, seq_len=job.seq_len)
        raise
    plan = replace(plan, dp=dp)
    chip = load_catalog().accelerators.get(scenario.hardware.gpu)
    options = MemoryOptions(seq_len=job.seq_len, precision=job.precision or chip.sixteen_bit,
                            grad_dtype=job.grad_dtype, optimizer=job.optimizer,
                            kernels=job.kernels, finetune=ft.method, lora_rank=ft.lora_rank,
                            lora_targets=tuple(ft.lora_targets))
    return training_memory(arch or scenario.model, chip, plan, options,
                           global_batch=job.global_batch)


SMALLER_OPTIMIZERS = {"adamw": ("adamw-8bit", "adamw-bf16"), "adamw-8bit": ("adamw-bf16",)}


def _fix_tries(plan: ParallelPlan, options: MemoryOptions, node_gpus: int
               ) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """Each knob change that saves memory: (its CLI flags, plan fields, option fields).
    TP is not widened past the node's NVLink domain (`node_gpus`): its per-layer
    collectives would cross the NICs, a fix that fits and runs several times slower."""
    tries: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
    if options.kernels == "eager":  # flash attention never holds the s x s scores
        tries.append(("--kernels fused", {}, {"kernels": "fused"}))
    if plan.recompute == "none":  # the milder recompute first: it keeps the GEMM outputs
        tries.append(("--recompute selective", {"recompute": "selective"}, {}))
    if plan.recompute != "full":
        tries.append(("--recompute full", {"recompute": "full", "recompute_fraction": 1.0},
                      {}))
    elif plan.recompute_fraction < 1:
        tries.append(("--recompute-fraction 1", {"recompute_fraction": 1.0}, {}))
    tries += [(f"--zero {z}", {"zero": z}, {}) for z in range(plan.zero + 1, 4)]
    if plan.tp > 1 and not plan.sequence_parallel:
        tries.append(("--sequence-parallel", {"sequence_parallel": True}, {}))
    if plan.micro_batch > 1:
        tries.append(("--micro-batch 1", {"micro_batch": 1}, {}))
    for name in ("tp", "pp"):
        value = getattr(plan, name) * 2
        if plan.dp % 2 == 0 and (name != "tp" or value <= node_gpus):
            # dp halves with it: named, so the change is right when --dp was given too
            tries.append((f"--{name} {value} --dp {plan.dp // 2}",
                          {name: value, "dp": plan.dp // 2}, {}))
    if options.finetune == "lora":
        tries.append(("--finetune qlora", {}, {"finetune": "qlora"}))
    # smaller optimizer states, the milder change first: 8-bit moments keep the fp32
    # master weights (6 bytes per parameter), pure bf16 drops them (4; states.py)
    for name in SMALLER_OPTIMIZERS.get(options.optimizer, ()):
        tries.append((f"--optimizer {name}", {}, {"optimizer": name}))
    return tries


def suggest_fixes(report: MemoryReport, *, limit: int = 4, changes: int = 1
                  ) -> list[tuple[str, MemoryReport]]:
    """Changes that make a plan that does not fit, fit, least memory first: single knobs
    (`changes=1`; of ZeRO stages only the lowest that fits), or pairs of knobs
    (`changes=2`, for when no single one is enough; of pairs on the same two knobs only
    the first that fits, so the milder ZeRO stage)."""
    plan, options = report.plan, report.options
    tries = _fix_tries(plan, options,
                       hardware.fabric(hardware.cluster(report.accelerator)).gpus_per_node)
    combos = [[t] for t in tries] if changes == 1 else [
        [a, b] for i, a in enumerate(tries) for b in tries[i + 1:]
        if not (a[1].keys() | a[2].keys()) & (b[1].keys() | b[2].keys())]
    global_batch = report.num_microbatches * plan.dp * plan.micro_batch
    fixes, done = [], set()
    for combo in combos:
        knobs = frozenset(k for _, p, o in combo for k in (*p, *o))
        if knobs in done:
            continue
        new_plan = replace(plan, **{k: v for _, p, _ in combo for k, v in p.items()})
        new_options = replace(options, **{k: v for _, _, o in combo for k, v in o.items()})
        try:
            candidate = training_memory(report.arch or report.model, report.accelerator,
                                        new_plan, new_options, global_batch=global_batch)
        except InputError:
            continue
        if candidate.fits:
            done.add(knobs)
            fixes.append((" ".join(label for label, _, _ in combo), candidate))
    fixes.sort(key=lambda item: item[1].total_bytes)
    return fixes[:limit]


def min_gpus_for_states(report: MemoryReport) -> int:
    """A floor on the accelerator count: the model states (weights, gradients, optimizer)
    sharded perfectly over N accelerators, with no activations, must fit beside the fixed
    overheads. Plans below it cannot fit whatever the parallelism."""
    from infraplan.physics.memory.states import state_bytes
    from infraplan.physics.memory.training import overhead_constant

    options = report.options
    wb, gb, k = state_bytes(options.precision, options.grad_dtype, options.optimizer)
    if options.finetune == "full":
        states = report.params_total * (wb + gb + k)
    else:  # frozen base weights dominate; the adapters are small
        states = report.params_total * (0.5 if options.finetune == "qlora" else wb)
    usable = report.capacity_bytes - overhead_constant("cuda-context") - overhead_constant(
        "communication-buffers")
    return max(1, int(-(-states // usable)))
