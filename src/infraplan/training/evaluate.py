"""Evaluate training plans: memory, step time, throughput, MFU/HFU, time, GPU-hours, energy.

`evaluate_plans` works on NumPy arrays of plans (one entry each); `evaluate_plan` wraps it for
one `ParallelPlan` and returns a `PlanResult` with the step-time breakdown.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

import numpy as np

from infraplan.catalog import load_catalog
from infraplan.catalog.schema import Accelerator, StorageTier, System
from infraplan.errors import InputError
from infraplan.models.arch import ModelArch
from infraplan.physics import hardware
from infraplan.physics.memory.training import (MemoryOptions, recompute_weights,
                                               training_memory_arrays)
from infraplan.training.layer_time import PlanArrays
from infraplan.training.plan import ParallelPlan
from infraplan.training.step_time import BREAKDOWN, StepOptions, flops_per_step, \
    step_time_arrays

SECONDS_PER_HOUR = 3600.0


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainingJob:
    """What is trained: fixed across the plans of a search."""

    seq_len: int
    global_batch: int
    tokens: float | None = None  # tokens to train on (time to train, GPU-hours)
    precision: str | None = None  # None: each accelerator's 16-bit type (on)
    grad_dtype: str | None = None
    optimizer: str = "adamw"
    kernels: str = "fused"
    storage: str | None = None  # storage tier name; None: no data-loading check
    data_bytes_per_token: float | None = None  # bytes read per token (raw text, images)

    def __post_init__(self):
        # A run shorter than one optimizer step has no time to train: the step takes
        # global_batch x seq_len tokens whatever the budget, and tokens / (tokens/s) would
        # report a fraction of it. It is refused rather than rounded up to one step: such a
        # budget is a unit slip (tokens in billions, global_batch in tokens instead of
        # sequences), and rounding would plan a run other than the one asked for.
        per_step = self.global_batch * self.seq_len
        if self.tokens is not None and self.tokens < per_step:
            shown = f"{self.tokens:,.0f}" if self.tokens >= 1 else f"{self.tokens:g}"
            raise InputError(
                f"training.tokens = {shown} is less than one optimizer step: "
                f"training.global_batch x training.seq_len = {self.global_batch:,} x "
                f"{self.seq_len:,} = {per_step:,} tokens",
                fix=f"give training.tokens >= {per_step:,} (a count of tokens, not steps or "
                    "billions), or a smaller training.global_batch (sequences per step)")

    def on(self, gpu: Accelerator) -> TrainingJob:
        """This job on `gpu`: a precision left out is the chip's 16-bit type (bf16, or fp16
        on V100 and T4, which have no bf16 tensor cores)."""
        return self if self.precision else replace(self, precision=gpu.sixteen_bit)

    def step_options(self) -> StepOptions:
        return StepOptions(seq_len=self.seq_len, global_batch=self.global_batch,
                           precision=self.precision, grad_dtype=self.grad_dtype,
                           optimizer=self.optimizer, kernels=self.kernels,
                           data_bytes_per_token=self.data_bytes_per_token)

    def memory_options(self) -> MemoryOptions:
        return MemoryOptions(seq_len=self.seq_len, precision=self.precision,
                             grad_dtype=self.grad_dtype, optimizer=self.optimizer,
                             kernels=self.kernels)


def plan_arrays(*, global_batch: int, **columns) -> PlanArrays:
    """PlanArrays from equal-length knob columns (recompute given as codes); each plan's
    micro-batches per step follow from the global batch, dp and the micro-batch size."""
    columns.setdefault("tp_overlap", 0.0)
    columns.setdefault("ep_overlap", 0.0)
    # etp 0 (or absent): the experts split as wide as the rest of the layer (etp = tp)
    tp = np.asarray(columns["tp"], dtype=float)
    etp = np.asarray(columns.get("etp", 0.0), dtype=float)
    columns["etp"] = np.where(etp > 0, etp, tp)
    columns["microbatches"] = global_batch / (np.asarray(columns["dp"], dtype=float)
                                              * np.asarray(columns["mb"], dtype=float))
    arrays = np.broadcast_arrays(*(np.asarray(columns[k], dtype=float) for k in (
        "tp", "pp", "dp", "cp", "ep", "etp", "vp", "zero", "sp", "mb", "recompute",
        "microbatches", "tp_overlap", "ep_overlap")))
    return PlanArrays(*arrays)


AUTO_RECOMPUTE = -1.0  # recompute code: the fewest fully recomputed layers that fit


def resolve_auto_recompute(arch: ModelArch, job: TrainingJob, p: PlanArrays,
                           capacity_bytes: float) -> PlanArrays:
    """Replace AUTO_RECOMPUTE codes by selective recompute plus full recompute of the fewest
    layers per pipeline rank that make the plan fit (Megatron-LM --recompute-method block
    --recompute-num-layers N). Memory is linear in that share once one layer is fully
    recomputed (the saved tensors fall linearly; the layer rebuilt in the backward is a
    whole one from the first), so it is solved directly on (0, 1]."""
    auto = p.recompute == AUTO_RECOMPUTE
    if not auto.any():
        return p
    sub = p.subset(auto)

    def total(code):
        return training_memory_arrays(
            arch, job.memory_options(), tp=sub.tp, pp=sub.pp, dp=sub.dp, cp=sub.cp,
            ep=sub.ep, etp=sub.etp, zero=sub.zero, vp=sub.vp, sequence_parallel=sub.sp,
            micro_batch=sub.mb, num_microbatches=sub.microbatches, recompute=code,
            ep_overlap=sub.ep_overlap)["total"]

    # memory at a share s > 0 is mixed + s (full - mixed) / (1 - tiny), `mixed` at s = tiny:
    # the saved tensors of all-selective layers with a whole layer rebuilt
    tiny = 1e-6
    selective, mixed, full = total(1.0), total(1.0 + tiny), total(2.0)
    share = np.clip((mixed - capacity_bytes) / np.maximum(mixed - full, 1.0) * (1 - tiny),
                    0, 1)
    share = np.where(selective <= capacity_bytes, 0.0, share)
    layers = np.ceil(arch.num_layers / sub.pp)
    share = np.ceil(share * layers - 1e-9) / layers  # whole layers
    recompute = p.recompute.copy()
    recompute[auto] = 1.0 + share
    return replace(p, recompute=recompute)


TRAINING_PRECISIONS = ("bf16", "fp16", "fp8", "fp32")


def precisions_of(gpu: Accelerator) -> list[str]:
    """The training precisions `gpu` has tensor cores for."""
    return [d for d in TRAINING_PRECISIONS if d in gpu.peak_flops]


def check_precision_peak(gpu: Accelerator, precision: str) -> None:
    """Training runs its GEMMs in `precision` on tensor cores of that precision: fp8 needs
    fp8 units (Transformer Engine), and the catalog's fallback to the 16-bit peak (an fp8
    model's weights upcast for inference) would plan a speed the chip does not have; bf16
    needs bf16 units, which V100 and T4 lack (Accelerator.peak_flops_for)."""
    if precision in gpu.peak_flops:
        return
    usable = precisions_of(gpu)
    families = {}  # one accelerator per family: h100-sxm5-80gb, b200-sxm-180gb, ...
    for a in load_catalog().accelerators:
        if precision in a.peak_flops:
            families.setdefault(a.name.split("-")[0], a.name)
    raise InputError(f"{gpu.name} has no peak FLOP/s for {precision!r} (it has "
                     f"{', '.join(gpu.peak_flops)}): {precision} training needs {precision} "
                     "tensor cores",
                     fix=(f"set training.precision to {' or '.join(usable)}; or " if usable
                          else "") + f"remove {gpu.name} from the accelerators, or use one "
                         f"with {precision} "
                         f"({', '.join(list(families.values())[:4])}, ...)")


def evaluate_plans(arch: ModelArch, gpu: str, job: TrainingJob, p: PlanArrays, *,
                   system: str | System | None = None) -> dict[str, np.ndarray]:
    """Everything the search ranks by, one entry per plan."""
    c = hardware.cluster(gpu, system)
    job = job.on(c.gpu)
    check_precision_peak(c.gpu, job.precision)
    dev = hardware.device(c.gpu.name, job.precision)
    fab = hardware.fabric(c)
    p = resolve_auto_recompute(arch, job, p, c.gpu.memory_bytes)
    gpus = p.tp * p.pp * p.dp * p.cp
    nodes = np.ceil(gpus / c.system.accelerators_per_node)
    storage: StorageTier | None = load_catalog().storage.get(job.storage) if job.storage \
        else None
    steps = step_time_arrays(arch, dev, fab, job.step_options(), p, storage=storage,
                             num_nodes=nodes)
    memory = training_memory_arrays(
        arch, job.memory_options(), tp=p.tp, pp=p.pp, dp=p.dp, cp=p.cp, ep=p.ep, etp=p.etp,
        zero=p.zero, vp=p.vp, sequence_parallel=p.sp, micro_batch=p.mb,
        num_microbatches=p.microbatches, recompute=p.recompute, ep_overlap=p.ep_overlap)
    model_flops, _ = flops_per_step(arch, job.step_options())
    _, selective, full = recompute_weights(p.recompute)
    hw_flops = model_flops + full * (flops_per_step(arch, job.step_options(), "full")[1]
                                     - model_flops) + selective * (
        flops_per_step(arch, job.step_options(), "selective")[1] - model_flops)
    peak = c.gpu.peak_flops_for(hardware.gemm_dtype(job.precision))
    step = steps["step"]
    tokens_per_step = job.global_batch * job.seq_len
    out = {f"time.{k}": steps[k] for k in BREAKDOWN}
    # each communication the step model also reports before overlap: what overlap hid
    for kind in (key.split(".", 1)[1] for key in steps if key.startswith("total.")):
        out[f"hidden.{kind}"] = np.maximum(steps[f"total.{kind}"] - steps[kind], 0.0)
    out.update(
        recompute=p.recompute, step_s=step, gpus=gpus, nodes=nodes,
        tokens_per_s=tokens_per_step / step,
        mfu=model_flops / (step * gpus * peak), hfu=hw_flops / (step * gpus * peak),
        memory_bytes=memory["total"], capacity_bytes=np.full_like(step, c.gpu.memory_bytes),
        fits=memory["total"] <= c.gpu.memory_bytes,
    )
    if job.tokens:
        # whole-run wall time: steady-state time over the run's goodput (failures, restarts)
        train_s = job.tokens / out["tokens_per_s"] / hardware.calibration("run-goodput")
        out.update(time_to_train_s=train_s, gpu_hours=train_s * gpus / SECONDS_PER_HOUR,
                   it_energy_kwh=train_s * gpus * c.gpu.tdp_watts / 3.6e6)
    return out


@dataclass(frozen=True)
class PlanResult:
    plan: ParallelPlan
    accelerator: str
    step_s: float
    breakdown_s: dict[str, float]
    tokens_per_s: float
    mfu: float
    hfu: float
    memory_bytes: float
    capacity_bytes: float
    fits: bool
    time_to_train_s: float | None = None
    gpu_hours: float | None = None
    # IT energy of the GPU boards alone at TDP for the run, kWh (no host, no PUE); the
    # facility energy (host and PUE included) is economics["energy_kwh"]
    it_energy_kwh: float | None = None
    hidden_s: dict[str, float] = field(default_factory=dict)  # communication overlapped
    precision: str | None = None  # the GEMMs' and weights' precision (TrainingJob.on)
    notes: tuple[str, ...] = field(default=())
    economics: dict | None = None  # cost line items, energy and carbon (plan train)

    def describe(self) -> str:
        return self.plan.describe()

    def to_json(self) -> dict:
        data = asdict(self)
        data["plan"] = asdict(self.plan)
        data["num_gpus"] = self.plan.num_gpus
        return data


def evaluate_plan(arch: ModelArch, gpu: str, job: TrainingJob, plan: ParallelPlan, *,
                  system: str | System | None = None) -> PlanResult:
    p = plan_arrays(tp=plan.tp, pp=plan.pp, dp=plan.dp, cp=plan.cp, ep=plan.ep,
                    etp=plan.expert_tp, vp=plan.vp,
                    zero=plan.zero, sp=float(plan.sequence_parallel), mb=plan.micro_batch,
                    recompute=plan.recompute_code, global_batch=job.global_batch,
                    tp_overlap=float(plan.tp_comm_overlap),
                    ep_overlap=float(plan.ep_comm_overlap))
    p = PlanArrays(*(np.atleast_1d(getattr(p, f)) for f in p.__dataclass_fields__))
    out = evaluate_plans(arch, gpu, job, p, system=system)
    scalar = {k: float(v[0]) for k, v in out.items()}
    chip = hardware.cluster(gpu, system).gpu
    return PlanResult(
        plan=plan, accelerator=chip.name, precision=job.on(chip).precision,
        step_s=scalar["step_s"],
        breakdown_s={k.split(".", 1)[1]: v for k, v in scalar.items() if k.startswith("time.")},
        tokens_per_s=scalar["tokens_per_s"], mfu=scalar["mfu"], hfu=scalar["hfu"],
        memory_bytes=scalar["memory_bytes"], capacity_bytes=scalar["capacity_bytes"],
        fits=bool(scalar["fits"]), time_to_train_s=scalar.get("time_to_train_s"),
        gpu_hours=scalar.get("gpu_hours"), it_energy_kwh=scalar.get("it_energy_kwh"),
        hidden_s={k.split(".", 1)[1]: v for k, v in scalar.items()
                  if k.startswith("hidden.") and v > 0})
