"""Search the plan space: evaluate every runnable plan at once, keep those that fit, rank by
time, and return the time vs GPU-hours Pareto frontier and why the other knob values lost.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from infraplan.catalog import load_catalog
from infraplan.catalog.schema import System
from infraplan.economics.spec import LinearCost
from infraplan.errors import InputError
from infraplan.models.arch import ModelArch
from infraplan.physics import hardware
from infraplan.training.evaluate import (AUTO_RECOMPUTE, PlanResult, TrainingJob,
                                         evaluate_plan, evaluate_plans, plan_arrays)
from infraplan.training.plan import ParallelPlan
from infraplan.training.space import Knobs, build_space, why_nothing_runs
from infraplan.training.step_time import BREAKDOWN
from infraplan.units import GiB

KNOB_COLUMNS = ("tp", "pp", "dp", "cp", "ep", "etp", "vp", "zero", "sp", "mb", "recompute",
                "tp_overlap", "ep_overlap")
# what ranking, limits, the frontier and the rejected-knob reasons read; the few plans
# shown are evaluated again in full (evaluate_plan, _breakdown)
KEPT_COLUMNS = frozenset({"fits", "step_s", "time_to_train_s", "gpu_hours", "gpus",
                          "memory_bytes", "capacity_bytes", "recompute"})
KNOB_LABELS = {"tp": "TP", "pp": "PP", "dp": "DP", "cp": "CP", "ep": "EP", "vp": "VP",
               "zero": "ZeRO", "mb": "micro-batch", "recompute": "recompute",
               "sp": "sequence parallel", "tp_overlap": "TP comm overlap",
               "ep_overlap": "EP all-to-all overlap",
               "etp": "expert folding (ETP < TP)"}
COMPONENT_LABELS = {"compute": "compute", "recompute": "recomputation",
                    "tp_comm": "tensor-parallel communication",
                    "cp_comm": "context-parallel communication",
                    "ep_comm": "expert all-to-all", "pp_p2p": "pipeline sends",
                    "bubble": "pipeline bubble", "dp_comm": "data-parallel sync",
                    "zero3_comm": "ZeRO-3 gathers", "optimizer": "optimizer step",
                    "data_stall": "data loading"}


@dataclass
class SearchResult:
    best: list[PlanResult]
    frontier: list[PlanResult]
    by_accelerator: list[PlanResult]  # the best plan of each accelerator type
    rejected: list[str]
    configs_evaluated: int
    candidates: int
    fitting: int
    search_seconds: float
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"best": [p.to_json() for p in self.best],
                "frontier": [p.to_json() for p in self.frontier],
                "by_accelerator": [p.to_json() for p in self.by_accelerator],
                "rejected": self.rejected, "configs_evaluated": self.configs_evaluated,
                "candidates": self.candidates, "fitting": self.fitting,
                "search_seconds": self.search_seconds, "notes": self.notes}


@dataclass(frozen=True)
class _Evaluated:
    gpu: str
    system: str | System | None  # node type the plans were evaluated on
    cols: dict[str, np.ndarray]  # knob columns
    out: dict[str, np.ndarray]  # evaluation results


def _evaluate_gpu(arch, gpu, job, knobs, system, tick=None):
    """Every plan of one accelerator type, expanded and evaluated a bounded chunk at a time
    (space.CHUNK_PLANS); `tick(counts_done)` after each chunk, in GPU counts (the outer rows
    run through the counts in order)."""
    space = build_space(arch, knobs, seq_len=job.seq_len, global_batch=job.global_batch)
    # "auto" recompute that resolves to selective (no layer fully recomputed) or to full
    # (every layer) is the same plan as the selective or full one the space also holds:
    # only that one is kept, so a plan is counted once and never fills two top-N slots
    explicit = [c for c in knobs.recompute if c != AUTO_RECOMPUTE]
    parts = []
    for plans, rows_done in space.chunks():
        if len(plans.tp):
            out = evaluate_plans(arch, gpu, job, plans, system=system)
            keep = ~((plans.recompute == AUTO_RECOMPUTE) & np.isin(out["recompute"], explicit))
            cols = {k: getattr(plans, k)[keep] for k in KNOB_COLUMNS}
            cols["recompute"] = out["recompute"][keep]  # auto resolved to a share of layers
            parts.append((cols, {k: v[keep] for k, v in out.items() if k in KEPT_COLUMNS}))
        if tick:
            tick(len(knobs.gpus) * rows_done // space.outer_rows if space.outer_rows
                 else len(knobs.gpus))
    cols = {k: np.concatenate([c[k] for c, _ in parts]) for k in KNOB_COLUMNS} if parts \
        else {k: np.zeros(0) for k in KNOB_COLUMNS}
    out = {k: np.concatenate([o[k] for _, o in parts]) for k in parts[0][1]} if parts else {}
    return _Evaluated(gpu, system, cols, out), space.candidates, len(cols["tp"])


def _plan_at(ev: _Evaluated, i: int) -> ParallelPlan:
    c = {k: v[i] for k, v in ev.cols.items()}
    return ParallelPlan(tp=int(c["tp"]), pp=int(c["pp"]), dp=int(c["dp"]), cp=int(c["cp"]),
                        ep=int(c["ep"]), vp=int(c["vp"]), zero=int(c["zero"]),
                        etp=None if c["etp"] == c["tp"] else int(c["etp"]),
                        sequence_parallel=bool(c["sp"]), micro_batch=int(c["mb"]),
                        tp_comm_overlap=bool(c["tp_overlap"]),
                        ep_comm_overlap=bool(c["ep_overlap"]),
                        **recompute_knob(float(c["recompute"])))


def recompute_knob(code: float) -> dict:
    """ParallelPlan fields of a numeric recompute code."""
    if code < 1:
        return {"recompute": "none", "recompute_fraction": 1.0}
    if code == 1:
        return {"recompute": "selective", "recompute_fraction": 1.0}
    return {"recompute": "full", "recompute_fraction": round(code - 1.0, 6)}


def search(arch: ModelArch, gpus: list[str], knobs: Knobs, job: TrainingJob, *,
           top: int = 5, system: str | System | dict[str, System] | None = None,
           deadline_s: float | None = None, budget_gpu_hours: float | None = None,
           cost: LinearCost | None = None, budget_usd: float | None = None,
           objective: str = "time", progress=None) -> SearchResult:
    """The `top` plans by `objective` ("time" to train, or total "cost" in USD, which needs
    `cost` and a token budget), the time vs cost frontier (GPU-hours without prices) and
    why other knob values lost. Deadline and budgets filter; when nothing meets them the
    error names the closest plans and by how much they miss."""
    if objective not in ("time", "cost"):
        raise InputError(f"objective must be 'time' or 'cost', got {objective!r}")
    if (objective == "cost" or budget_usd is not None) and (cost is None or job.tokens is None):
        raise InputError("ranking or budgeting by cost needs prices and training.tokens",
                         fix="give training.tokens (the run's length sets its cost)")
    start = time.perf_counter()
    evaluated, candidates, count = [], 0, 0
    for done, gpu in enumerate(gpus):
        node = system.get(gpu) if isinstance(system, dict) else \
            system if len(gpus) == 1 else None  # a named node type holds one accelerator
        tick = None if progress is None else (
            lambda counts, done=done: progress(done * len(knobs.gpus) + counts,
                                               len(gpus) * len(knobs.gpus)))
        ev, cands, n = _evaluate_gpu(arch, gpu, job, knobs, node, tick)
        if cost is not None and "gpu_hours" in ev.out:
            ev.out["cost_usd"] = cost.total_usd(gpu, ev.out["gpu_hours"],
                                                ev.out["time_to_train_s"])
        evaluated.append(ev)
        candidates += cands
        count += n
    limits = _Limits(deadline_s, budget_gpu_hours, budget_usd)
    ranked = []  # (objective, ev, index)
    fitting = 0
    for ev in evaluated:
        if not ev.out:
            continue
        fitting += int(ev.out["fits"].sum())
        ok = _allowed(ev, limits)
        score = _objective(ev, objective)
        for i in np.flatnonzero(ok)[np.argsort(score[ok])[: max(top, 64)]]:
            ranked.append((float(score[i]), ev, int(i)))
    ranked.sort(key=lambda r: r[0])
    elapsed = time.perf_counter() - start
    if not ranked:
        if count == 0:
            raise InputError("no runnable plan: " + why_nothing_runs(
                arch, knobs, seq_len=job.seq_len, global_batch=job.global_batch))
        raise _nothing_fits(evaluated, limits, knobs, arch, job)
    results = [_result(arch, ev, i, job) for _, ev, i in ranked[:top]]
    frontier = [_result(arch, ev, i, job)
                for ev, i in _frontier(evaluated, limits)]
    best_ev, best_i = ranked[0][1], ranked[0][2]
    per_gpu = {}
    for _, ev, i in ranked:  # ranked is sorted: the first of each accelerator is its best
        per_gpu.setdefault(ev.gpu, (ev, i))
    by_accelerator = [_result(arch, ev, i, job) for ev, i in per_gpu.values()]
    return SearchResult(best=results, frontier=frontier, by_accelerator=by_accelerator,
                        rejected=_why_rejected(arch, job, best_ev, best_i),
                        configs_evaluated=count, candidates=candidates, fitting=fitting,
                        search_seconds=elapsed)


def _result(arch, ev, i, job) -> PlanResult:
    return evaluate_plan(arch, ev.gpu, job, _plan_at(ev, i), system=ev.system)


def _frontier(evaluated, limits: _Limits, limit: int = 12):
    """Plans no other plan beats on both time and cost (USD when prices are known, else
    GPU-hours; per step when no token budget is given: step time vs GPU-seconds per step),
    at most `limit` of them spread along the curve."""
    times, costs, owners, rows = [], [], [], []
    for n, ev in enumerate(evaluated):
        if not ev.out:
            continue
        ok = np.flatnonzero(_allowed(ev, limits))
        times.append(_objective(ev, "time")[ok])
        costs.append(ev.out.get("cost_usd", ev.out.get(
            "gpu_hours", ev.out["step_s"] * ev.out["gpus"]))[ok])
        owners.append(np.full(len(ok), n))
        rows.append(ok)
    if not times:
        return []
    t, cost = np.concatenate(times), np.concatenate(costs)
    owner, row = np.concatenate(owners), np.concatenate(rows)
    order = np.lexsort((cost, t))  # by time, then cost
    cheapest_before = np.minimum.accumulate(np.concatenate([[np.inf], cost[order]]))[:-1]
    on_front = order[cost[order] < cheapest_before * (1 - 1e-9)]
    if len(on_front) > limit:
        on_front = on_front[np.linspace(0, len(on_front) - 1, limit).round().astype(int)]
    return [(evaluated[owner[i]], int(row[i])) for i in on_front]


@dataclass(frozen=True)
class _Limits:
    deadline_s: float | None
    budget_gpu_hours: float | None
    budget_usd: float | None

    def checks(self):
        """(result column, limit, what it is) for each limit given."""
        return [(col, lim, what) for col, lim, what in (
            ("time_to_train_s", self.deadline_s, "deadline"),
            ("gpu_hours", self.budget_gpu_hours, "GPU-hour budget"),
            ("cost_usd", self.budget_usd, "USD budget")) if lim is not None]


def _allowed(ev: _Evaluated, limits: _Limits) -> np.ndarray:
    ok = ev.out["fits"].copy()
    for column, limit, _ in limits.checks():
        if column in ev.out:
            ok &= ev.out[column] <= limit
    return ok


def _objective(ev: _Evaluated, objective: str) -> np.ndarray:
    if objective == "cost":
        return ev.out["cost_usd"]
    return ev.out.get("time_to_train_s", ev.out["step_s"])


def _why_rejected(arch, job, ev: _Evaluated, best: int, limit: int = 4) -> list[str]:
    """For each knob, the best plan with another value of it and what made it lose: the
    memory it needs, or the part of the step that grew (compared at the best plan's GPU
    count when that count allows the value). Up to `limit` values per knob, the nearest."""
    out = ev.out
    objective = out.get("time_to_train_s", out["step_s"])
    same_count = out["gpus"] == out["gpus"][best]
    reasons: list[str] = []
    pending = []  # (position in reasons, knob, shown value, plan index, slowdown)
    columns = {knob: _knob_column(ev, knob) for knob in KNOB_LABELS}
    for knob, label in KNOB_LABELS.items():
        column = columns[knob]
        others = [v for v in np.unique(column) if v != column[best]]
        others.sort(key=lambda v: abs(np.log2(max(v, 0.5) / max(column[best], 0.5))))
        for value in others[:limit]:
            rows = column == value
            shown = _knob_value(knob, value)
            fit = rows & out["fits"]
            if not fit.any():
                need = out["memory_bytes"][rows].min() / GiB
                cap = out["capacity_bytes"][best] / GiB
                reasons.append(f"{label}={shown}: does not fit (at least {need:.1f} GiB of "
                               f"{cap:.1f} GiB)")
                continue
            pool = fit & same_count if (fit & same_count).any() else fit
            j = int(np.flatnonzero(pool)[np.argmin(objective[pool])])
            slower = objective[j] / objective[best] - 1
            if not same_count[j]:
                reasons.append(f"{label}={shown}: {slower:+.0%}, best at {int(out['gpus'][j])} "
                               f"GPUs ({int(out['gpus'][best])} GPUs do not divide into it)")
                continue
            pending.append((len(reasons), knob, shown, j, slower))
            reasons.append("")  # filled in below, once the step breakdowns are known
    parts = _breakdown(arch, job, ev, [best] + [p[3] for p in pending])
    for n, (at, knob, shown, j, slower) in enumerate(pending, start=1):
        deltas = {k: parts[k][n] - parts[k][0] for k in BREAKDOWN}
        worst = max(deltas, key=deltas.get)
        why = COMPONENT_LABELS[worst]
        boundary = _boundary_crossed(ev, float(ev.cols["tp"][j])) if knob == "tp" else None
        if boundary:
            why += f"; TP={shown} crosses {boundary}"
        reasons[at] = (f"{KNOB_LABELS[knob]}={shown}: {slower:+.0%}, mostly {why} "
                       f"(+{deltas[worst]:.3f} s per step)" + _also_changed(columns, knob, j, best))
    return reasons


def _also_changed(columns: dict[str, np.ndarray], knob: str, j: int, best: int,
                  limit: int = 3) -> str:
    """The other knobs plan `j` sets apart from the best plan: what the time it lost went
    to may come from them (ZeRO-0 only fits with recompute, and pays for the recompute)."""
    changed = [f"{KNOB_LABELS[k]}={_knob_value(k, column[j])}" for k, column in columns.items()
               if k != knob and column[j] != column[best]]
    if not changed:
        return ""
    more = f" and {len(changed) - limit} more" if len(changed) > limit else ""
    return f"; with {', '.join(changed[:limit])}{more}"


def _breakdown(arch, job, ev: _Evaluated, rows: list[int]) -> dict[str, np.ndarray]:
    """The step-time parts of a few evaluated plans (the search keeps only what it ranks
    by), evaluated again at once: the evaluation is per plan, so they are the same numbers."""
    cols = {k: ev.cols[k][np.asarray(rows, dtype=int)] for k in KNOB_COLUMNS}
    plans = plan_arrays(**cols, global_batch=job.global_batch)
    out = evaluate_plans(arch, ev.gpu, job, plans, system=ev.system)
    return {k: out[f"time.{k}"] for k in BREAKDOWN}


def _knob_column(ev: _Evaluated, knob: str) -> np.ndarray:
    """A knob's values per plan; recompute shares collapse to none/selective/partial/full,
    the experts' TP to whether it is folded below TP."""
    column = ev.cols[knob]
    if knob == "recompute":
        return np.select([column < 1, column == 1, column < 2], [0.0, 1.0, 1.5], 2.0)
    if knob == "etp":
        return (column < ev.cols["tp"]).astype(float)
    return column


def _boundary_crossed(ev: _Evaluated, tp: float) -> str | None:
    """What a TP group of `tp` ranks leaves: the node, or a rack's NVLink domain."""
    system = hardware.cluster(ev.gpu, ev.system).system
    if tp <= system.scale_up_accelerators:
        return None
    if system.scale_up_domain_accelerators:
        return f"the {system.scale_up_accelerators}-GPU NVLink domain"
    return "the node boundary"


def _knob_value(knob, value):
    if knob == "recompute":
        return {0.0: "none", 1.0: "selective", 1.5: "partial full", 2.0: "full"}[float(value)]
    if knob in ("sp", "tp_overlap", "ep_overlap", "etp"):
        return "on" if value else "off"
    return int(value)


def _nothing_fits(evaluated, limits: _Limits, knobs: Knobs, arch, job) -> InputError:
    mins = [(ev.out["memory_bytes"].min(), ev) for ev in evaluated if ev.out]
    need, ev = min(mins, key=lambda m: m[0])
    cap = ev.out["capacity_bytes"][0]
    if need > cap:
        return _too_big(ev, need, cap, knobs, arch, job)
    # A limit that every fitting plan misses is named with the plan closest to it; limits
    # that some plan meets are not to blame and are left out. When each limit alone is met
    # but no plan meets them all, each is named with the plan closest to it among those
    # that meet the others.
    fitting = [ev for ev in evaluated if ev.out and ev.out["fits"].any()]
    checks = [c for c in limits.checks() if any(c[0] in ev.out for ev in fitting)]
    missed = []
    for column, limit, what in checks:
        best = _closest(fitting, column, [ev.out["fits"] for ev in fitting])
        if best is not None and best > limit:
            missed.append((column, limit, what, best))
    together = ""
    if not missed:
        together = " together"
        for column, limit, what in checks:
            masks = [ev.out["fits"] & np.logical_and.reduce(
                [ev.out[c] <= lim for c, lim, _ in checks if c != column and c in ev.out],
                initial=True) for ev in fitting]
            best = _closest(fitting, column, masks)
            if best is not None:
                missed.append((column, limit, what, best))
    if not missed:  # three limits, no two of which one plan meets
        return InputError(f"no plan meets any two of the {' and '.join(c[2] for c in checks)}, "
                          "although each alone is met; relax the limits or allow more or "
                          "other GPUs")
    closest = [f"the plan closest to the {what} ({_format(column, best)}"
               + (")" if not together else ", the best within the other limits)")
               + _miss(column, limit, best) for column, limit, what, best in missed]
    named = checks if together else missed
    return InputError(f"no plan meets the {' and '.join(m[2] for m in named)}{together}: "
                      f"{'; '.join(closest)}; relax the limits or allow more or other GPUs")


def _too_big(ev: _Evaluated, need: float, cap: float, knobs: Knobs, arch: ModelArch,
             job: TrainingJob) -> InputError:
    """No plan fits: name the smallest plan, and as fixes only the levers it does not pull
    already (a pinned ZeRO stage or recompute shows as unused) and accelerators with room."""
    plan = _plan_at(ev, int(np.argmin(ev.out["memory_bytes"])))
    # More GPUs shrink a plan's memory only through a knob that grows with them: model
    # parallelism (TP, PP, EP) and ZeRO split the model states, CP the activations. With
    # the first pinned and ZeRO-0, only a wider CP is left, and it helps only if the rest
    # of the plan fits.
    from infraplan.training.memory import training_memory

    splitting = ("tp", "pp", "ep")[:3 if arch.is_moe else 2]
    pinned = [f"pin.{k}" for k in splitting
              if getattr(knobs, k) is not None and len(getattr(knobs, k)) == 1]
    states_split = len(pinned) < len(splitting) or max(knobs.zero) > 0
    chip = hardware.cluster(ev.gpu, ev.system).gpu
    smallest = training_memory(arch, chip, plan, job.on(chip).memory_options(),
                               global_batch=job.global_batch)
    fixes = []
    if states_split or (plan.cp < max(knobs.cp)
                        and smallest.total_bytes - smallest.activations_bytes < cap):
        fixes.append(f"allow more GPUs than {max(knobs.gpus)} (hardware.max_count, or "
                     "hardware.counts)")
    if pinned:
        fixes.append(f"unpin {' and '.join(pinned)} so that model parallelism may split the "
                     "weights")
    if 3 not in knobs.zero:
        fixes.append("unpin pin.zero so that ZeRO-3 may shard the weights")
    if not any(c >= 2 or c == AUTO_RECOMPUTE for c in knobs.recompute):  # 2: full
        fixes.append("unpin pin.recompute so that full recompute may drop the activations")
    roomy = {}  # the smallest accelerator of each family that holds the plan
    for a in sorted(load_catalog().accelerators, key=lambda a: a.memory_bytes):
        if a.memory_bytes >= need:
            roomy.setdefault(a.name.split("-")[0], a.name)
    if roomy:
        fixes.append(f"an accelerator with {math.ceil(need / GiB)} GiB or more "
                     f"({', '.join(list(roomy.values())[:4])})")
    return InputError(f"no plan fits in memory: the smallest ({plan.describe()}) needs "
                      f"{need / GiB:.1f} GiB per accelerator, {ev.gpu} has {cap / GiB:.1f} GiB",
                      fix=", or ".join(fixes))


def _closest(evaluated, column: str, masks) -> float | None:
    """The lowest value of `column` over the plans each mask selects (None: no plan)."""
    values = [ev.out[column][mask].min() for ev, mask in zip(evaluated, masks, strict=True)
              if column in ev.out and mask.any()]
    return min(values, default=None)


def _miss(column: str, limit: float, best: float) -> str:
    """How far a plan is past a limit: a percentage, or for a wide miss (+15768% says
    little) the multiple and the limit."""
    if best < 2 * limit:
        return f" misses it by {best / limit - 1:+.0%}"
    return f" is {best / limit:,.3g} times it ({_format(column, limit)})"


def _format(column: str, value: float) -> str:
    days = f"{value / 86400:,.1f} days" if value >= 86400 else f"{value / 3600:,.3g} hours"
    return {"time_to_train_s": days,  # a deadline under a day read "0.0 days"
            "gpu_hours": f"{value:,.0f} GPU-hours",
            "cost_usd": f"${value:,.0f}"}[column]
