"""The search's evaluated plans: knob and result columns per accelerator type, the limits
that filter them, and the few rows that are evaluated again in full."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from infraplan.catalog.schema import System
from infraplan.training.evaluate import evaluate_plans, plan_arrays
from infraplan.training.plan import ParallelPlan
from infraplan.training.step_time import BREAKDOWN

KNOB_COLUMNS = ("tp", "pp", "dp", "cp", "ep", "etp", "vp", "zero", "sp", "mb", "recompute",
                "tp_overlap", "ep_overlap")
# what ranking, limits, the frontier and the rejected-knob reasons read; the few plans
# shown are evaluated again in full (evaluate_plan, breakdown)
KEPT_COLUMNS = ("fits", "step_s", "time_to_train_s", "gpu_hours", "memory_bytes")


def kept_rows(cols: dict[str, np.ndarray], out: dict[str, np.ndarray]
              ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """What a search keeps of a chunk of evaluated plans, in about a third of the bytes of
    its float64 columns (a search may evaluate tens of millions): every plan that fits, and
    of the others only those a report can name, the least memory of each knob value (why a
    value lost: 'does not fit (at least 90.1 GiB)'; the smallest plan when nothing fits),
    the first such plan where several tie, as in the full columns. Knobs are small whole
    numbers (int32); recompute keeps its float code (a share of layers)."""
    fits = out["fits"]
    rows = np.flatnonzero(~fits)
    keep = fits.copy()
    keep[_least_memory_rows(cols, out["memory_bytes"], rows)] = True
    kept = {k: (v[keep] if k == "recompute" else v[keep].astype(np.int32))
            for k, v in cols.items()}
    result = {k: out[k][keep] for k in KEPT_COLUMNS if k in out}
    result["gpus"] = (kept["tp"] * kept["pp"] * kept["dp"] * kept["cp"]).astype(np.int32)
    # one capacity per accelerator type: a read-only view, not a column
    result["capacity_bytes"] = np.broadcast_to(out["capacity_bytes"][:1], fits[keep].shape)
    return kept, result


def _least_memory_rows(cols, memory, rows) -> np.ndarray:
    """Of `rows`, the first with the least memory for each value of each knob (as
    knob_column groups them): no sort, a minimum per value code."""
    if not len(rows):
        return rows
    m, picked = memory[rows], []
    for knob in KNOB_COLUMNS:
        code = (2 * knob_column(cols, knob, rows)).astype(np.intp)  # values are k / 2
        least = np.full(int(code.max()) + 1, np.inf)
        np.minimum.at(least, code, m)
        at_min = np.flatnonzero(m == least[code])
        first = np.full(len(least), len(rows))
        np.minimum.at(first, code[at_min], at_min)
        picked.append(rows[first[first < len(rows)]])
    return np.concatenate(picked)


def knob_column(cols: dict[str, np.ndarray], knob: str, rows=slice(None)) -> np.ndarray:
    """A knob's values per plan as reasons name them: recompute shares collapse to
    none/selective/partial/full (0, 1, 1.5, 2), the experts' TP to whether it is folded
    below TP."""
    column = cols[knob][rows]
    if knob == "recompute":
        return np.select([column < 1, column == 1, column < 2], [0.0, 1.0, 1.5], 2.0)
    if knob == "etp":
        return (column < cols["tp"][rows]).astype(float)
    return column


@dataclass(frozen=True)
class Evaluated:
    """Every plan the search evaluated on one accelerator type, as columns."""
    gpu: str
    system: str | System | None  # node type the plans were evaluated on
    cols: dict[str, np.ndarray]  # knob columns
    out: dict[str, np.ndarray]  # evaluation results


def plan_at(ev: Evaluated, i: int) -> ParallelPlan:
    """Plan `i` of the columns as a ParallelPlan."""
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


@dataclass(frozen=True)
class Limits:
    deadline_s: float | None
    budget_gpu_hours: float | None
    budget_usd: float | None

    def checks(self):
        """(result column, limit, what it is) for each limit given."""
        return [(col, lim, what) for col, lim, what in (
            ("time_to_train_s", self.deadline_s, "deadline"),
            ("gpu_hours", self.budget_gpu_hours, "GPU-hour budget"),
            ("cost_usd", self.budget_usd, "USD budget")) if lim is not None]


def allowed(ev: Evaluated, limits: Limits) -> np.ndarray:
    """The plans that fit and meet every limit given."""
    ok = ev.out["fits"].copy()
    for column, limit, _ in limits.checks():
        if column in ev.out:
            ok &= ev.out[column] <= limit
    return ok


def objective_of(ev: Evaluated, objective: str) -> np.ndarray:
    """What the plans are ranked by: total cost, or time to train (per step without a
    token budget)."""
    if objective == "cost":
        return ev.out["cost_usd"]
    return ev.out.get("time_to_train_s", ev.out["step_s"])


def spend_of(ev: Evaluated) -> np.ndarray:
    """The frontier's cost axis: USD when prices are known, else GPU-hours (GPU-seconds
    per step when no token budget is given)."""
    return ev.out.get("cost_usd", ev.out.get("gpu_hours", ev.out["step_s"] * ev.out["gpus"]))


def tie_breaker(ev: Evaluated, objective: str) -> np.ndarray:
    """What orders plans that tie on the objective: the other axis of the frontier, so
    the best plan is the frontier's end point (ties on both keep the enumeration order)."""
    return objective_of(ev, "time") if objective == "cost" else spend_of(ev)


def breakdown(arch, job, ev: Evaluated, rows: list[int]) -> dict[str, np.ndarray]:
    """The step-time parts of a few evaluated plans (the search keeps only what it ranks
    by), evaluated again at once: the evaluation is per plan, so they are the same numbers."""
    cols = {k: ev.cols[k][np.asarray(rows, dtype=int)].astype(float) for k in KNOB_COLUMNS}
    plans = plan_arrays(**cols, global_batch=job.global_batch)
    out = evaluate_plans(arch, ev.gpu, job, plans, system=ev.system)
    return {k: out[f"time.{k}"] for k in BREAKDOWN}
