"""The plan space: every (GPU count x TP x PP x CP x EP x ZeRO x micro-batch x recompute x
sequence parallel x virtual stages) a job could use, built as NumPy arrays and pruned by
what cannot run (a degree that does not divide) before anything is evaluated.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np

from infraplan.models.arch import ModelArch
from infraplan.training.evaluate import plan_arrays
from infraplan.training.layer_time import PlanArrays
from infraplan.training.plan import (ParallelPlan, PlanError, check_plan, etp_degrees,
                                     tp_degrees)

POWERS_OF_TWO = (1, 2, 4, 8, 16, 32, 64, 128, 256)
VIRTUAL_STAGES = (1, 2, 3, 4, 6, 8, 12, 16)
MICRO_BATCHES = (1, 2, 4, 8, 16, 32)


@dataclass(frozen=True)
class Knobs:
    """Values each knob may take; a single value pins it."""

    gpus: tuple[int, ...]
    tp: tuple[int, ...] = POWERS_OF_TWO
    pp: tuple[int, ...] | None = None  # None: 1..num_layers (powers of two and divisors)
    cp: tuple[int, ...] = (1, 2, 4, 8, 16, 32)
    ep: tuple[int, ...] | None = None  # None: divisors of the expert count (1 if dense)
    # the routed experts' TP: 0 = tp (Megatron-Core's default), 1 = folded onto whole
    # experts (MoE parallel folding); ignored for dense models
    etp: tuple[int, ...] = (0, 1)
    dp: tuple[int, ...] | None = None  # None: whatever the GPU count leaves
    zero: tuple[int, ...] = (0, 1, 2, 3)
    micro_batch: tuple[int, ...] = MICRO_BATCHES
    # none, selective, full, and "auto": full recompute of the fewest layers that fit
    recompute: tuple[float, ...] = (0.0, 1.0, 2.0, -1.0)
    tp_overlap: tuple[int, ...] = (0, 1)
    # MoE all-to-all overlap (Megatron-Core >= 0.14 --overlap-moe-expert-parallel-comm, or
    # DualPipe): off unless asked for, since it needs that stack and rules out full
    # recompute; ignored for dense models
    ep_overlap: tuple[int, ...] = (0,)
    sequence_parallel: tuple[int, ...] = (0, 1)
    vp: tuple[int, ...] | None = None  # None: VIRTUAL_STAGES and even splits (default_vp)


def default_pp(arch: ModelArch) -> tuple[int, ...]:
    layers = arch.num_layers
    values = {p for p in POWERS_OF_TWO if p <= layers}
    values |= {d for d in range(1, layers + 1) if layers % d == 0 and d <= 128}
    return tuple(sorted(values))


def default_vp(arch: ModelArch, pp_values: tuple[int, ...]) -> tuple[int, ...]:
    """Virtual stages per rank: the usual choices, and every count up to their largest
    that splits a stage's layers evenly (10 for 80 layers in 4 stages, 7 for 126 in 9),
    since uneven chunks pay the largest chunk's bubble."""
    layers, most = arch.num_layers, max(VIRTUAL_STAGES)
    values = set(VIRTUAL_STAGES)
    for pp in pp_values:
        if pp > 1 and layers % pp == 0:
            per_stage = layers // pp
            values |= {d for d in range(2, min(per_stage, most) + 1) if per_stage % d == 0}
    return tuple(sorted(values))


# Plans expanded and evaluated at a time: a chunk's arrays are a few MB, so a search of
# millions of plans neither holds gigabytes of candidates nor pays the kernel to zero
# fresh pages for every temporary (page faults had cost more than the arithmetic).
CHUNK_PLANS = 1 << 19


@dataclass(frozen=True)
class Space:
    """The pruned outer rows (GPU count x TP x PP x CP, with the DP they leave) and the
    inner knob combinations; `chunks()` expands them into runnable plans a bounded batch at
    a time."""

    outer: dict[str, np.ndarray]
    inner_axes: dict[str, np.ndarray]  # each inner knob's values, in the grid's axis order
    candidates: int  # size of the product before any pruning
    num_layers: int
    global_batch: int
    zero_free: bool = False  # ZeRO-0 is allowed: ZeRO >= 1 over one DP x CP rank repeats it
    expert_width: int = 0  # the routed experts' intermediate size (0: dense model)

    @cached_property
    def inner(self) -> dict[str, np.ndarray]:
        """The inner knobs' product grid, flattened (C order: the last axis fastest)."""
        return _product(**self.inner_axes)

    @property
    def outer_rows(self) -> int:
        return len(self.outer["n"])

    def chunks(self, max_plans: int | None = None):
        """(plans, outer rows done): the runnable plans in outer-row order, at
        most `max_plans` (CHUNK_PLANS by default) at a time. Runnability is a 2-D mask of
        outer rows x inner combinations, so only surviving plans are ever gathered."""
        max_plans = max_plans or CHUNK_PLANS
        n_in = max(len(self.inner["zero"]), 1)
        block = max(1, max_plans // n_in)  # outer rows masked at once: <= max_plans cells
        pending, count = [], 0
        for first in range(0, self.outer_rows, block):
            last = min(first + block, self.outer_rows)
            oi, ii = np.nonzero(self._runnable(slice(first, last)))
            if count and count + len(oi) > max_plans:
                yield self._gather(pending), first
                pending, count = [], 0
            pending.append((oi + first, ii))
            count += len(oi)
        if pending or not self.outer_rows:
            yield self._gather(pending), self.outer_rows

    def _runnable(self, rows: slice) -> np.ndarray:
        """(outer rows, inner combinations) that can run together. Each inner knob keeps an
        axis of its own, so each rule is worked out over the knobs it reads alone and only
        the ANDs that join the rules span the whole (rows x grid)."""
        o = {k: v[rows].reshape(-1, *[1] * len(self.inner_axes))
             for k, v in self.outer.items()}
        i = {name: values.reshape(-1, *[1] * (len(self.inner_axes) - axis))
             for axis, (name, values) in enumerate(self.inner_axes.items(), start=1)}
        ok = self._rules(o, i)
        shape = (len(o["tp"]), *(len(v) for v in self.inner_axes.values()))
        return np.broadcast_to(ok, shape).reshape(shape[0], -1)

    def _rules(self, o: dict[str, np.ndarray], i: dict[str, np.ndarray]) -> np.ndarray:
        """The mask of the rules, broadcast over the axes they read."""
        ok = (self.global_batch % (o["dp"] * i["mb"])) == 0
        ok = ok & ((i["sp"] == 0) | (o["tp"] > 1))
        ok = ok & ((i["tp_overlap"] == 0) | (i["sp"] > 0))  # userbuffer overlap needs SP
        # all-to-all overlap needs EP, the interleaved schedule when pipelined, and no full
        # recompute (plan._check_ep_overlap); "auto" recompute may resolve to full
        overlap_runs = (i["ep"] > 1) & ((o["pp"] == 1) | (i["vp"] > 1)) \
            & (i["recompute"] >= 0) & (i["recompute"] < 2)
        ok = ok & ((i["ep_overlap"] == 0) | overlap_runs)
        # interleaving needs a pipeline and at least one layer per model chunk; uneven
        # chunks are allowed (Megatron-Core's --pipeline-model-parallel-layout places any
        # layers in any chunk) and pay the largest chunk's bubble (step_time)
        ok = ok & ((i["vp"] == 1) | ((o["pp"] > 1) & (o["pp"] * i["vp"] <= self.num_layers)))
        # interleaving runs micro-batches in groups of pp (see check_plan)
        microbatches = self.global_batch // (o["dp"] * i["mb"])
        ok = ok & ((i["vp"] == 1) | ((microbatches % o["pp"]) == 0))
        if self.expert_width:
            # the experts' grid (plan._check_expert_grid): etp 0 means etp = tp, EP carved
            # out of DP x CP; a folded etp divides tp, and etp x EP the stage's tp x dp x cp
            etp = np.where(i["etp"] == 0, o["tp"], i["etp"])
            # an explicit etp = tp repeats etp 0 (= tp) when that is among the values
            distinct = (i["etp"] < o["tp"]) if (self.inner_axes["etp"] == 0).any() else True
            ok = ok & ((i["etp"] == 0) | (distinct & (o["tp"] % etp == 0)))
            grid = np.where(i["etp"] == 0, (o["dp"] * o["cp"]) % i["ep"],
                            (o["tp"] * o["dp"] * o["cp"]) % (etp * i["ep"]))
            ok = ok & (grid == 0)
            ok = ok & (self.expert_width % etp == 0)
        else:
            ok = ok & (((o["dp"] * o["cp"]) % i["ep"]) == 0)
        if self.zero_free:
            # ZeRO shards states, gradients (and with 3 weights) over DP x CP: over one rank
            # it shards nothing and communicates nothing. ZeRO-1 and -2 are then the same
            # plan as ZeRO-0, and ZeRO-3 is ZeRO-0 plus a gather buffer. Keep ZeRO-0, so
            # that no plan is listed twice under two names.
            ok = ok & ((o["dp"] * o["cp"] > 1) | (i["zero"] == 0))
        return ok

    def _gather(self, pending) -> PlanArrays:
        oi = np.concatenate([o for o, _ in pending]) if pending else np.zeros(0, int)
        ii = np.concatenate([i for _, i in pending]) if pending else np.zeros(0, int)
        col = {k: v[oi] for k, v in self.outer.items() if k != "n"}
        col.update({k: v[ii] for k, v in self.inner.items()})
        return plan_arrays(**col, global_batch=self.global_batch)


def _product(**axes) -> dict[str, np.ndarray]:
    names = list(axes)
    grids = np.meshgrid(*(np.asarray(axes[n], dtype=float) for n in names), indexing="ij")
    return {n: g.ravel() for n, g in zip(names, grids, strict=True)}


def build_space(arch: ModelArch, knobs: Knobs, *, seq_len: int, global_batch: int) -> Space:
    at = arch.attention
    pp_values = knobs.pp or default_pp(arch)
    vp_values = knobs.vp or default_vp(arch, pp_values)
    ep_values = _ep_values(arch, knobs)
    ep_overlap = knobs.ep_overlap if arch.is_moe else (0,)
    etp_values = knobs.etp if arch.is_moe else (0,)
    inner = (len(knobs.zero) * len(knobs.micro_batch) * len(knobs.recompute)
             * len(knobs.sequence_parallel) * len(vp_values) * len(ep_values)
             * len(knobs.tp_overlap) * len(ep_overlap) * len(etp_values))
    candidates = len(knobs.gpus) * len(knobs.tp) * len(pp_values) * len(knobs.cp) * inner

    # outer axes: prune what cannot divide before expanding the inner ones
    o = _product(n=knobs.gpus, tp=knobs.tp, pp=pp_values, cp=knobs.cp)
    dp = o["n"] / (o["tp"] * o["pp"] * o["cp"])
    ok = (dp >= 1) & (dp == np.floor(dp))
    ok &= at.num_heads % o["tp"] == 0
    if at.kind != "mla":
        kv = at.num_kv_heads
        ok &= (kv % o["tp"] == 0) | (o["tp"] % kv == 0)
    # the routed experts' width must divide their own TP (etp): checked per plan
    if arch.num_dense_layers:
        ok &= arch.mlp.intermediate_size % o["tp"] == 0
    ok &= o["pp"] <= arch.num_layers
    ok &= (o["cp"] == 1) | (seq_len % (2 * o["cp"]) == 0)
    if knobs.dp is not None:
        ok &= np.isin(dp, knobs.dp)
    o = {k: v[ok] for k, v in o.items()}
    o["dp"] = dp[ok]
    axes = {name: np.asarray(values, dtype=float) for name, values in (
        ("zero", knobs.zero), ("mb", knobs.micro_batch), ("recompute", knobs.recompute),
        ("sp", knobs.sequence_parallel), ("vp", vp_values), ("ep", ep_values),
        ("tp_overlap", knobs.tp_overlap), ("ep_overlap", ep_overlap), ("etp", etp_values))}
    return Space(outer=o, inner_axes=axes, candidates=candidates,
                 num_layers=arch.num_layers, global_batch=global_batch,
                 zero_free=0 in knobs.zero,
                 expert_width=arch.moe.expert.intermediate_size if arch.is_moe else 0)


def _ep_values(arch: ModelArch, knobs: Knobs) -> tuple[int, ...]:
    """EP degrees that can shard the experts: divisors of the expert count (1 if dense)."""
    if not arch.is_moe:
        return tuple(e for e in knobs.ep or (1,) if e == 1)
    return tuple(e for e in knobs.ep or POWERS_OF_TWO if arch.moe.num_experts % e == 0)


def why_nothing_runs(arch: ModelArch, knobs: Knobs, *, seq_len: int, global_batch: int) -> str:
    """Why `knobs` leave no runnable plan, naming the pinned degree (a knob with one value)
    that rules everything out, else the rule that the combinations break."""
    pinned = {k: v[0] for k, v in vars(knobs).items()
              if k != "gpus" and v is not None and len(v) == 1}
    etp = int(pinned.get("etp", 0))  # 0: etp = tp
    if arch.is_moe and etp:
        # an etp must divide the experts' width and the tp it folds below: name the values
        # that can work with the pinned tp, else with some tp the model runs
        tps = [int(pinned["tp"])] if "tp" in pinned else tp_degrees(arch)
        if etp not in etp_degrees(arch, tps):
            which = (f"the pinned tp={tps[0]} is not" if "tp" in pinned else
                     f"no tp {arch.name} can run ({', '.join(map(str, tps))}) is")
            return (f"etp={etp} must divide moe_intermediate_size="
                    f"{arch.moe.expert.intermediate_size} and tp, and {which} a multiple of "
                    f"it. To fix: use etp in {', '.join(map(str, etp_degrees(arch, tps)))}")
        if "tp" not in pinned:  # probe with the smallest tp the etp folds below
            pinned["tp"] = min(t for t in tps if t % etp == 0)
    # what a pinned degree breaks on its own, whatever the GPU count: check_plan's rules on
    # a plan of the pinned degrees and 1 elsewhere (dp = ep so that EP may shard over DP)
    probe = ParallelPlan(**{k: int(pinned.get(k, 1)) for k in ("tp", "pp", "cp", "ep")},
                         dp=int(pinned.get("ep", 1)),
                         etp=int(pinned["etp"]) if pinned.get("etp") else None,
                         vp=int(pinned.get("vp", 1)) if "pp" in pinned else 1)
    try:
        check_plan(arch, probe, seq_len=seq_len)
    except PlanError as exc:
        return str(exc)
    counts = ", ".join(str(n) for n in knobs.gpus[:6]) + (", ..." if len(knobs.gpus) > 6 else "")
    if arch.is_moe and pinned.get("ep", 1) > 1:
        # EP shards the experts over one pipeline stage's ranks (dp x cp, and tp too when the
        # experts fold below it, etp=1): ep must divide GPUs / pp for some allowed count
        ep, pps = int(pinned["ep"]), [int(pinned["pp"])] if "pp" in pinned else [1]
        spans = sorted({n // p for n in knobs.gpus for p in pps if n % p == 0})
        if spans and not any(s % ep == 0 for s in spans):
            per = "GPUs / pp" if "pp" in pinned else "the GPU count"
            fits = [e for e in _ep_values(arch, replace(knobs, ep=None))
                    if any(s % e == 0 for s in spans)]
            return (f"ep={ep}: the experts shard over the ranks of one pipeline stage, so ep "
                    f"must divide {per} ({', '.join(map(str, spans[:6]))} here). To fix: use "
                    f"ep in {', '.join(map(str, fits))}, or allow a multiple of "
                    f"{ep * int(pinned.get('pp', 1))} GPUs")
    space = build_space(arch, knobs, seq_len=seq_len, global_batch=global_batch)
    if not space.outer_rows:
        model = " x ".join(f"{k}={pinned[k]}" for k in ("tp", "pp", "cp") if k in pinned)
        if model:
            return (f"{model} leaves no whole data-parallel degree"
                    + (f" equal to dp={pinned['dp']}" if "dp" in pinned else "")
                    + f" on the allowed GPU counts ({counts})")
        if "dp" in pinned:
            return (f"dp={pinned['dp']}: no TP x PP x CP split leaves it on the allowed GPU "
                    f"counts ({counts})")
        return f"no TP x PP x CP split divides the allowed GPU counts ({counts})"
    if "micro_batch" in pinned:
        mb, dps = pinned["micro_batch"], sorted({int(d) for d in space.outer["dp"]})
        if all(global_batch % (dp * mb) for dp in dps):
            fits = sorted({m for dp in dps if global_batch % dp == 0
                           for m in MICRO_BATCHES if (global_batch // dp) % m == 0})
            return (f"micro_batch={mb}: global_batch {global_batch} is not a multiple of "
                    f"dp x micro_batch for any data-parallel degree left "
                    f"({', '.join(map(str, dps[:6]))})"
                    + (f". To fix: pin micro_batch to one of {', '.join(map(str, fits))}"
                       if fits else ""))
    vp = pinned.get("vp", 1)
    if vp > 1:
        plain = build_space(arch, replace(knobs, vp=(1,)), seq_len=seq_len,
                            global_batch=global_batch)
        if plain._runnable(slice(None)).any():
            return (f"vp={int(vp)}: interleaving needs the micro-batches per step, "
                    f"global_batch / (dp x micro_batch), to be a multiple of pp, and no "
                    f"allowed dp and micro_batch make them so")
    # the experts split as wide as TP (etp left at tp, or pinned to it): would folding run?
    as_tp = knobs.etp == (0,) or ("etp" in pinned and pinned["etp"] == pinned.get("tp"))
    if arch.is_moe and as_tp:
        folded = build_space(arch, replace(knobs, etp=(1,)), seq_len=seq_len,
                             global_batch=global_batch)
        if folded._runnable(slice(None)).any():
            dpcp = sorted({int(d * c) for d, c in zip(space.outer["dp"], space.outer["cp"])})
            return (f"ep must divide dp*cp ({', '.join(map(str, dpcp[:6]))} here) while the "
                    f"experts split as wide as TP: set etp=1 (MoE parallel folding) to let EP "
                    f"span the TP ranks")
    if pinned.get("ep_overlap") == 1 and arch.is_moe:
        plain = build_space(arch, replace(knobs, ep_overlap=(0,)), seq_len=seq_len,
                            global_batch=global_batch)
        if plain._runnable(slice(None)).any():
            return ("ep_comm_overlap needs ep > 1, the interleaved schedule (vp > 1) when "
                    "pp > 1, and recompute none or selective: no allowed combination has all "
                    "three")
    return _batch_or_count_fix(arch, knobs, seq_len=seq_len, global_batch=global_batch,
                               dps=sorted({int(d) for d in space.outer["dp"]}))


def _runs(arch: ModelArch, knobs: Knobs, *, seq_len: int, global_batch: int) -> bool:
    space = build_space(arch, knobs, seq_len=seq_len, global_batch=global_batch)
    return bool(space.outer_rows) and bool(space._runnable(slice(None)).any())


def _batch_or_count_fix(arch: ModelArch, knobs: Knobs, *, seq_len: int, global_batch: int,
                        dps: list[int]) -> str:
    """The last resort of why_nothing_runs: the splits exist but no data-parallel degree they
    leave divides the global batch. Name those degrees and the nearest global batches and
    GPU counts that run (each checked by building its space), else the generic rule."""
    mbs = sorted({int(m) for m in knobs.micro_batch})
    # the nearest multiples of dp x micro_batch on either side, closest first
    steps = {d * m for d in dps for m in mbs}
    near = sorted({b for s in steps for b in (global_batch // s * s, -(-global_batch // s) * s)
                   if b > 0 and b != global_batch}, key=lambda b: (abs(b - global_batch), b))
    batches = list(itertools.islice((b for b in near[:12] if _runs(
        arch, knobs, seq_len=seq_len, global_batch=b)), 2))  # the two nearest that run

    def first_count(tries) -> list[int]:  # the first GPU count that runs, if any
        return next(([c] for c in tries if _runs(arch, replace(knobs, gpus=(c,)),
                                                  seq_len=seq_len, global_batch=global_batch)),
                    [])

    lo, hi = min(knobs.gpus), max(knobs.gpus)
    counts = (first_count(range(lo - 1, max(lo // 2, 1) - 1, -1))
              + first_count(range(hi + 1, min(2 * hi, hi + 256) + 1)))
    fixes = ([f"set training.global_batch to {' or '.join(map(str, sorted(batches)))}"]
             if batches else [])
    where = "hardware.counts" if len(knobs.gpus) == 1 else "hardware.counts, or count_step"
    fixes += [f"allow {' or '.join(map(str, counts))} GPUs ({where})"] if counts else []
    if not fixes:
        return ("no combination of the allowed degrees divides the GPU counts, heads and "
                "global batch")
    shown = ", ".join(map(str, dps[:8])) + (", ..." if len(dps) > 8 else "")
    return (f"global_batch {global_batch} is not a multiple of dp x micro_batch for any "
            f"data-parallel degree the allowed splits leave ({shown}). To fix: "
            + ", or ".join(fixes))
