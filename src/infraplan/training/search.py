"""Search the plan space: evaluate every runnable plan at once, keep those that fit, rank by
time, and return the time vs GPU-hours Pareto frontier and why the other knob values lost.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from infraplan.catalog.schema import System
from infraplan.economics.spec import LinearCost
from infraplan.errors import InputError
from infraplan.models.arch import ModelArch
from infraplan.training.constraints import removed_notes
from infraplan.training.evaluate import (AUTO_RECOMPUTE, PlanResult, TrainingJob,
                                         evaluate_plan, evaluate_plans)
from infraplan.training.evaluated import (KNOB_COLUMNS, Evaluated, Limits, allowed,
                                          kept_rows, objective_of, plan_at, spend_of,
                                          tie_breaker)
from infraplan.training.explain import left_out, nothing_fits, why_rejected
from infraplan.training.space import Knobs, build_space, why_nothing_runs


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


def _evaluate_gpu(arch, gpu, job, knobs, system, tick=None):
    """Every plan of one accelerator type, expanded and evaluated a bounded chunk at a time
    (space.CHUNK_PLANS); `tick(counts_done)` after each chunk, in GPU counts (the outer rows
    run through the counts in order)."""
    space = build_space(arch, knobs, seq_len=job.seq_len, global_batch=job.global_batch)
    # "auto" recompute that resolves to selective (no layer fully recomputed) or to full
    # (every layer) is the same plan as the selective or full one the space also holds:
    # only that one is kept, so a plan is counted once and never fills two top-N slots
    explicit = [c for c in knobs.recompute if c != AUTO_RECOMPUTE]
    parts, count = [], 0
    for plans, rows_done in space.chunks():
        if len(plans.tp):
            out = evaluate_plans(arch, gpu, job, plans, system=system)
            keep = ~((plans.recompute == AUTO_RECOMPUTE) & np.isin(out["recompute"], explicit))
            cols = {k: getattr(plans, k)[keep] for k in KNOB_COLUMNS}
            cols["recompute"] = out["recompute"][keep]  # auto resolved to a share of layers
            parts.append(kept_rows(cols, {k: v[keep] for k, v in out.items()}))
            count += len(cols["tp"])
            del out, cols, plans  # before the next chunk's: the peak holds one chunk
        if tick:
            tick(len(knobs.gpus) * rows_done // space.outer_rows if space.outer_rows
                 else len(knobs.gpus))
    if not parts:
        return Evaluated(gpu, system, {k: np.zeros(0) for k in KNOB_COLUMNS}, {}), \
            space.candidates, 0
    # column by column, each chunk's copy freed as it is joined: the peak is the result
    # and one column, not twice the result
    cols = {k: np.concatenate([c.pop(k) for c, _ in parts]) for k in KNOB_COLUMNS}
    out = {k: np.concatenate([o.pop(k) for _, o in parts]) for k in list(parts[0][1])
           if k != "capacity_bytes"}
    out["capacity_bytes"] = np.broadcast_to(parts[0][1]["capacity_bytes"][:1], out["fits"].shape)
    return Evaluated(gpu, system, cols, out), space.candidates, count


def node_for(system, gpu: str, gpus: list[str]):
    """The node type `gpu` is planned on: its entry of a per-accelerator dict, or a named
    node type when one accelerator is searched (a node type holds one accelerator)."""
    return system.get(gpu) if isinstance(system, dict) else system if len(gpus) == 1 else None


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
        node = node_for(system, gpu, gpus)
        tick = None if progress is None else (
            lambda counts, done=done: progress(done * len(knobs.gpus) + counts,
                                               len(gpus) * len(knobs.gpus)))
        ev, cands, n = _evaluate_gpu(arch, gpu, job, knobs, node, tick)
        if cost is not None and "gpu_hours" in ev.out:
            ev.out["cost_usd"] = cost.total_usd(gpu, ev.out["gpu_hours"],
                                                ev.out["time_to_train_s"], ev.out["gpus"], node)
        evaluated.append(ev)
        candidates += cands
        count += n
    limits = Limits(deadline_s, budget_gpu_hours, budget_usd)
    ranked = []  # (objective, tie-breaker, accelerator number, index, ev)
    fitting = 0
    for n, ev in enumerate(evaluated):
        if not ev.out:
            continue
        fitting += int(ev.out["fits"].sum())
        rows = np.flatnonzero(allowed(ev, limits))
        score, second = objective_of(ev, objective), tie_breaker(ev, objective)
        for i in rows[np.lexsort((second[rows], score[rows]))[: max(top, 64)]]:
            ranked.append((float(score[i]), float(second[i]), n, int(i), ev))
    ranked.sort(key=lambda r: r[:4])
    elapsed = time.perf_counter() - start
    if not ranked:
        if count == 0:
            raise InputError("no runnable plan: " + why_nothing_runs(
                arch, knobs, seq_len=job.seq_len, global_batch=job.global_batch))
        raise nothing_fits(evaluated, limits, knobs, arch, job)
    results = [_result(arch, ev, i, job) for *_, i, ev in ranked[:top]]
    frontier = [_result(arch, ev, i, job)
                for ev, i in _frontier(evaluated, limits)]
    *_, best_i, best_ev = ranked[0]
    per_gpu = {}
    for *_, i, ev in ranked:  # ranked is sorted: the first of each accelerator is its best
        per_gpu.setdefault(ev.gpu, (ev, i))
    by_accelerator = [_result(arch, ev, i, job) for ev, i in per_gpu.values()]
    return SearchResult(best=results, frontier=frontier, by_accelerator=by_accelerator,
                        rejected=why_rejected(arch, job, best_ev, best_i, objective=objective),
                        configs_evaluated=count, candidates=candidates, fitting=fitting,
                        search_seconds=elapsed,
                        notes=removed_notes(evaluated, limits, objective, ranked[0][0])
                        + left_out(evaluated, knobs, arch, job))


def _result(arch, ev, i, job) -> PlanResult:
    return evaluate_plan(arch, ev.gpu, job, plan_at(ev, i), system=ev.system)


def _frontier(evaluated, limits: Limits, limit: int = 12):
    """Plans no other plan beats on both time and cost (USD when prices are known, else
    GPU-hours; per step when no token budget is given: step time vs GPU-seconds per step),
    at most `limit` of them spread along the curve."""
    times, costs, owners, rows = [], [], [], []
    for n, ev in enumerate(evaluated):
        if not ev.out:
            continue
        ok = np.flatnonzero(allowed(ev, limits))
        times.append(objective_of(ev, "time")[ok])
        costs.append(spend_of(ev)[ok])
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
