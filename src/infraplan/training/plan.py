"""A parallel training plan and the checks that tell whether it can run at all."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

from infraplan.errors import PlanError
from infraplan.models.arch import ModelArch
from infraplan.physics.memory.training import RECOMPUTE, recompute_code


@dataclass(frozen=True, slots=True, kw_only=True)
class ParallelPlan:
    """How one training step is split over `num_gpus` accelerators.

    tp: tensor parallel (Megatron-LM), pp: pipeline stages, dp: data-parallel replicas,
    cp: context parallel (ring attention over the sequence), ep: expert parallel (carved
    out of DP x CP), vp: virtual pipeline stages per rank (interleaved 1F1B), zero: ZeRO
    stage / FSDP (3 = full shard), micro_batch: sequences per micro-batch.
    etp: tensor parallelism of the routed experts (Megatron-Core
    --expert-tensor-parallel-size; None: tp). Below tp, the MoE layers fold their own
    grid over the same ranks (Liu et al. 2025, "MoE Parallel Folding", arXiv 2504.14960):
    etp x ep ranks share the experts, so EP may span TP ranks and each rank keeps whole
    experts' slices etp-wide.
    """

    tp: int = 1
    pp: int = 1
    dp: int = 1
    cp: int = 1
    ep: int = 1
    etp: int | None = None
    vp: int = 1
    zero: int = 0
    sequence_parallel: bool = False
    micro_batch: int = 1
    recompute: str = "none"
    recompute_fraction: float = 1.0  # with "full": share of each stage's layers recomputed
    tp_comm_overlap: bool = False  # TP all-gathers/reduce-scatters pipelined with GEMMs
    # MoE all-to-alls of one micro-batch run beside another micro-batch's compute
    # (Megatron-Core --overlap-moe-expert-parallel-comm; DeepSeek-V3's DualPipe)
    ep_comm_overlap: bool = False

    @property
    def recompute_code(self) -> float:
        return recompute_code(self.recompute, self.recompute_fraction)

    @property
    def expert_tp(self) -> int:
        return self.tp if self.etp is None else self.etp

    @property
    def num_gpus(self) -> int:
        return self.tp * self.pp * self.dp * self.cp

    def describe(self) -> str:
        parts = [f"TP={self.tp}", f"PP={self.pp}" + (f"x{self.vp}" if self.vp > 1 else ""),
                 f"DP={self.dp}"]
        parts += [f"CP={self.cp}"] if self.cp > 1 else []
        parts += [f"EP={self.ep}"] if self.ep > 1 else []
        parts += [f"ETP={self.expert_tp}"] if self.expert_tp != self.tp else []
        recompute = self.recompute
        if recompute == "full" and self.recompute_fraction < 1:
            recompute += f"({self.recompute_fraction:.0%} of layers, rest selective)"
        parts += [f"ZeRO-{self.zero}", f"mb={self.micro_batch}", f"recompute={recompute}"]
        parts += ["SP"] if self.sequence_parallel and self.tp > 1 else []
        parts += ["TP-overlap"] if self.tp_comm_overlap and self.tp > 1 else []
        parts += ["EP-overlap"] if self.ep_comm_overlap else []
        return " ".join(parts)

    def uneven_layout_note(self, num_layers: int) -> str | None:
        """What to set when the pipeline's model chunks cannot hold equal layer counts
        (126 layers in 16 stages, 80 in 4 x 16 chunks): Megatron-Core's default split
        refuses them; a custom layout places them (physics/memory/states.stage_layer_indices
        gives the extra layers to the first chunks, as priced)."""
        chunks = self.pp * self.vp
        if self.pp == 1 or num_layers % chunks == 0:
            return None
        small = num_layers // chunks
        what = f"{self.pp} stages x {self.vp} chunks" if self.vp > 1 else f"{self.pp} stages"
        return (f"PP={self.pp}{f'x{self.vp}' if self.vp > 1 else ''} splits the "
                f"{num_layers} layers unevenly ({what} of {small} or {small + 1} layers): "
                "give Megatron-Core the split with --pipeline-model-parallel-layout; the "
                "largest chunk sets the pipeline bubble")


def plan_legend(plans) -> str:
    """What the short forms of describe() mean, for the terms that `plans` (ParallelPlans)
    use: a paragraph of terminal lines under a table of plans."""
    plans = list(plans)
    interleaved = next((p for p in plans if p.vp > 1), None)
    terms = [f"PP={interleaved.pp}x{interleaved.vp}: {interleaved.pp} pipeline stages of "
             f"{interleaved.vp} model chunks each (virtual stages, interleaved 1F1B)"
             ] if interleaved else []
    terms += ["ZeRO-1/2/3: optimizer states / + gradients / + weights sharded over DP"]
    terms += ["mb: sequences per micro-batch"]
    used = {word for p in plans for word in p.describe().split()}
    terms += [f"{word}: {meaning}" for word, meaning in (
        ("SP", "sequence parallel"), ("TP-overlap", "TP communication overlapped with GEMMs"),
        ("EP-overlap", "expert all-to-alls overlapped with another micro-batch")) if word in used]
    if any(p.expert_tp != p.tp for p in plans):
        terms += ["ETP: the routed experts' tensor parallelism"]
    return textwrap.fill("plan terms: " + "; ".join(terms), width=100, subsequent_indent="  ",
                         break_on_hyphens=False)


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def tp_degrees(arch: ModelArch) -> list[int]:
    """The TP degrees `arch` can run: divisors of its attention heads that divide its KV
    heads or are multiples of them (MLA has none), and its dense MLP width."""
    at, kv = arch.attention, arch.attention.num_kv_heads
    return [t for t in divisors(at.num_heads)
            if (at.kind == "mla" or kv % t == 0 or t % kv == 0)
            and (not arch.num_dense_layers or arch.mlp.intermediate_size % t == 0)]


def etp_degrees(arch: ModelArch, tps: list[int]) -> list[int]:
    """The routed experts' TP degrees that can work with one of `tps`: an etp divides the
    experts' width and the TP it folds below."""
    width = arch.moe.expert.intermediate_size
    return [e for e in divisors(width) if any(t % e == 0 for t in tps)]


def _show(values: list[int]) -> str:
    return ", ".join(map(str, values[:16])) + (", ..." if len(values) > 16 else "")


def _listed(name: str, values: list[int]) -> str:
    """'cp=1' for one value, 'cp in 1, 2, 4' for several."""
    return f"{name}={values[0]}" if len(values) == 1 else f"{name} in {_show(values)}"


def resolve_dp(num_gpus: int, tp: int, pp: int, cp: int, dp: int | None) -> int:
    """DP from the GPU count when not given; a mismatch names every degree."""
    model_parallel = tp * pp * cp
    if dp is None:
        if num_gpus % model_parallel:
            raise PlanError(f"num_gpus={num_gpus} is not a multiple of tp*pp*cp = "
                            f"{tp}*{pp}*{cp} = {model_parallel}",
                            fix=f"use a GPU count that is a multiple of {model_parallel}")
        return num_gpus // model_parallel
    if model_parallel * dp != num_gpus:
        raise PlanError(f"tp*pp*dp*cp = {tp}*{pp}*{dp}*{cp} = {model_parallel * dp} but "
                        f"num_gpus={num_gpus}",
                        fix="make the degrees multiply to the GPU count, or leave --dp out")
    return dp


def check_plan(arch: ModelArch, plan: ParallelPlan, *, seq_len: int,
               global_batch: int | None = None, kernels: str = "fused",
               gpus_fixed: bool = False) -> int:
    """Raise PlanError for a plan that cannot run; return micro-batches per step.
    `gpus_fixed`: the plan's GPU count is the job's (a memory check), so a pp or cp offered
    instead must also divide the GPUs left to it; a search's probe has no count yet."""
    at = arch.attention
    for name in ("tp", "pp", "dp", "cp", "ep", "expert_tp", "vp", "micro_batch"):
        if getattr(plan, name) < 1:
            raise PlanError(f"{name} must be >= 1, got {getattr(plan, name)}")
    if plan.zero not in (0, 1, 2, 3):
        raise PlanError(f"zero must be 0, 1, 2 or 3, got {plan.zero}")
    if plan.recompute not in RECOMPUTE:
        raise PlanError(f"recompute must be one of {', '.join(RECOMPUTE)}, got "
                        f"{plan.recompute!r}")
    if not 0 < plan.recompute_fraction <= 1:
        raise PlanError(f"recompute_fraction must be in (0, 1], got {plan.recompute_fraction}")
    if at.num_heads % plan.tp:
        raise PlanError(f"tp={plan.tp} does not divide the {at.num_heads} attention heads of "
                        f"{arch.name}", fix=f"use tp in {_show(divisors(at.num_heads))}")
    kv = at.num_kv_heads
    if at.kind != "mla" and kv % plan.tp and plan.tp % kv:
        raise PlanError(f"tp={plan.tp} neither divides nor is a multiple of the {kv} KV "
                        f"heads of {arch.name}", fix="use a tp that divides the KV heads, or "
                        "a multiple of them (KV heads are then replicated)")
    widths = [("tp", plan.tp, "intermediate_size", arch.mlp.intermediate_size)
              ] if arch.num_dense_layers else []
    if arch.moe:
        widths.append(("etp" if plan.etp is not None else "tp", plan.expert_tp,
                       "moe_intermediate_size", arch.moe.expert.intermediate_size))
    for knob, degree, label, width in widths:
        if width % degree:
            # an etp must also divide this plan's tp: only values that do are offered
            fits = etp_degrees(arch, [plan.tp]) if knob == "etp" else divisors(width)
            raise PlanError(f"{knob}={degree} does not divide {label}={width} of {arch.name}",
                            fix=f"use {knob} in {_show(fits)}")
    if plan.pp > arch.num_layers:
        left = plan.pp * plan.dp
        fits = [p for p in divisors(left) if p <= arch.num_layers]
        raise PlanError(f"pp={plan.pp} exceeds the {arch.num_layers} layers of {arch.name}",
                        fix=f"use {_listed('pp', fits)} (at most one stage per layer, dividing "
                            f"the {left:,} GPUs left to pp*dp)" if gpus_fixed else
                            f"use pp <= {arch.num_layers} (at most one stage per layer)")
    if plan.vp > 1:
        if plan.pp == 1:
            raise PlanError("vp (virtual pipeline stages) > 1 needs pp > 1",
                            fix="set pp > 1 with it, or vp=1")
        if plan.pp * plan.vp > arch.num_layers:
            raise PlanError(f"pp*vp = {plan.pp * plan.vp} model chunks exceed the "
                            f"{arch.num_layers} layers", fix="lower vp")
    if plan.cp > 1:
        chunk = 2 * plan.cp
        if seq_len % chunk:
            # Load-balanced ring attention (Megatron-LM, torchtitan) gives each CP rank two
            # of 2*cp chunks of the sequence: the nearest lengths that split, or the degrees
            # that split this one (dividing the GPUs left to dp*cp, when those are known;
            # else the small ones: CP spans at most a few hundred GPUs)
            lower, upper = seq_len // chunk * chunk, (seq_len // chunk + 1) * chunk
            lengths = f"{lower} or {upper}" if lower else f"{upper}"
            degrees = divisors(plan.dp * plan.cp) if gpus_fixed else range(1, 129)
            fits = [c for c in degrees if c == 1 or seq_len % (2 * c) == 0]
            raise PlanError(f"seq_len={seq_len} must be divisible by 2*cp = {chunk} "
                            "(load-balanced ring attention splits it in 2*cp chunks)",
                            fix=f"use seq_len={lengths}, or {_listed('cp', fits)}")
        if kernels == "eager":
            raise PlanError("context parallelism needs fused (flash) attention kernels",
                            fix="use kernels=fused or cp=1")
    if not arch.is_moe:
        if plan.ep > 1:
            raise PlanError(f"ep={plan.ep} but {arch.name} has no experts", fix="use ep=1")
        if plan.etp is not None and plan.etp != plan.tp:
            raise PlanError(f"etp={plan.etp} but {arch.name} has no experts",
                            fix="remove etp")
    else:
        if arch.moe.num_experts % plan.ep:
            raise PlanError(f"ep={plan.ep} does not divide the {arch.moe.num_experts} experts",
                            fix=f"use ep in {_show(divisors(arch.moe.num_experts))}")
        _check_expert_grid(arch, plan)
    if plan.ep_comm_overlap:
        _check_ep_overlap(plan)
    if global_batch is None:
        return plan.pp  # enough micro-batches to fill the pipeline
    per_step = plan.dp * plan.micro_batch
    if global_batch < 1 or global_batch % per_step:
        raise PlanError(f"global_batch={global_batch} is not a multiple of dp*micro_batch = "
                        f"{plan.dp}*{plan.micro_batch} = {per_step}",
                        fix="change global_batch, micro_batch or dp")
    microbatches = global_batch // per_step
    # The interleaved schedule runs micro-batches in groups of pp through each model chunk:
    # Megatron-LM's forward_backward_pipelining_with_interleaving refused any other count
    # until 2024, and Megatron-core still does unless microbatch_group_size_per_vp_stage
    # is tuned (its default is pp).
    if plan.vp > 1 and microbatches % plan.pp:
        raise PlanError(f"interleaving (vp={plan.vp}) needs the micro-batches per step, "
                        f"global_batch / (dp*micro_batch) = {microbatches}, to be a multiple "
                        f"of pp={plan.pp}", fix="change micro_batch or global_batch, or use vp=1")
    return microbatches


def _check_expert_grid(arch: ModelArch, plan: ParallelPlan) -> None:
    """Megatron-Core's expert grid: etp x ep x expert-DP ranks over each pipeline stage's
    tp x cp x dp. With etp = tp (no folding) EP is carved out of DP x CP; a smaller etp
    divides tp, each etp-group taking its share of the TP group's tokens."""
    etp = plan.expert_tp
    if etp != plan.tp and plan.tp % etp:
        raise PlanError(f"etp={etp} must divide tp={plan.tp} (each expert-TP group takes "
                        "a share of the TP group's tokens)",
                        fix=f"use etp in {_show(etp_degrees(arch, [plan.tp]))}")
    if etp == plan.tp:
        if (plan.dp * plan.cp) % plan.ep:
            raise PlanError(f"ep={plan.ep} must divide dp*cp = {plan.dp * plan.cp} (experts "
                            "are spread over data-parallel ranks)",
                            fix="set etp=1 to let EP span the TP ranks (MoE parallel "
                                "folding), or change ep, dp or cp")
    elif (plan.tp * plan.dp * plan.cp) % (etp * plan.ep):
        raise PlanError(f"etp*ep = {etp}*{plan.ep} must divide tp*dp*cp = "
                        f"{plan.tp * plan.dp * plan.cp} (the ranks of one pipeline stage)",
                        fix="change ep, etp or the other degrees")


def _check_ep_overlap(plan: ParallelPlan) -> None:
    """Megatron-Core's batch-level all-to-all overlap (TransformerConfig checks, v0.14):
    it needs expert parallelism, the interleaved schedule when pp > 1 (its combined 1F1B
    pairs chunk passes of different micro-batches), and no full recomputation."""
    if plan.ep == 1:
        raise PlanError("ep_comm_overlap hides expert all-to-alls: it needs ep > 1",
                        fix="set ep > 1 or turn ep_comm_overlap off")
    if plan.pp > 1 and plan.vp == 1:
        raise PlanError("ep_comm_overlap with pp > 1 needs the interleaved schedule (vp > 1)",
                        fix="set vp > 1, pp = 1, or turn ep_comm_overlap off")
    if plan.recompute == "full":
        raise PlanError("ep_comm_overlap cannot run with full recomputation",
                        fix="use recompute none or selective, or turn ep_comm_overlap off")
