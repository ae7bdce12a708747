"""Why the search's other choices lost: each knob value beside the best plan's and the
part of the step that grew, and, when no plan is returned, the memory or limit to blame
with the fixes that would help."""

from __future__ import annotations

import math

import numpy as np

from infraplan.catalog import load_catalog
from infraplan.errors import InputError
from infraplan.models.arch import ModelArch
from infraplan.physics import hardware
from infraplan.training.constraints import limits_missed, percent
from infraplan.training.evaluate import AUTO_RECOMPUTE, TrainingJob
from infraplan.training.evaluated import (Evaluated, Limits, breakdown, knob_column,
                                          objective_of, plan_at)
from infraplan.training.space import Knobs
from infraplan.training.step_time import BREAKDOWN
from infraplan.units import GiB

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


def why_rejected(arch, job, ev: Evaluated, best: int, limit: int = 4,
                 objective: str = "time") -> list[str]:
    """For each knob, the best plan with another value of it and what made it lose: the
    memory it needs, or the part of the step that grew (compared at the best plan's GPU
    count when that count allows the value). Up to `limit` values per knob, the nearest.
    Plans are compared by the scenario's `objective`, which each reason names: total cost
    (with the other plan's dollars), or time to train (step time without a token budget)."""
    out = ev.out
    by_cost = objective == "cost" and "cost_usd" in out  # no price: compared by time
    score = objective_of(ev, "cost" if by_cost else "time")
    measure = ("total cost" if by_cost
               else "time to train" if "time_to_train_s" in out else "step time")
    same_count = out["gpus"] == out["gpus"][best]
    reasons: list[str] = []
    pending = []  # (position in reasons, knob, shown value, plan index, slowdown)
    columns = {knob: knob_column(ev.cols, knob) for knob in KNOB_LABELS}
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
            j = int(np.flatnonzero(pool)[np.argmin(score[pool])])
            worse = (f"{percent(score[j] / score[best] - 1)} {measure}"
                     + (f" (${score[j]:,.0f})" if by_cost else ""))
            if not same_count[j]:
                reasons.append(f"{label}={shown}: {worse}, best at {int(out['gpus'][j])} "
                               f"GPUs ({int(out['gpus'][best])} GPUs do not divide into it)")
                continue
            pending.append((len(reasons), knob, shown, j, worse))
            reasons.append("")  # filled in below, once the step breakdowns are known
    parts = breakdown(arch, job, ev, [best] + [p[3] for p in pending])
    for n, (at, knob, shown, j, worse) in enumerate(pending, start=1):
        deltas = {k: parts[k][n] - parts[k][0] for k in BREAKDOWN}
        worst = max(deltas, key=deltas.get)
        why = COMPONENT_LABELS[worst]
        boundary = _boundary_crossed(ev, float(ev.cols["tp"][j])) if knob == "tp" else None
        if boundary:
            why += f"; TP={shown} crosses {boundary}"
        reasons[at] = (f"{KNOB_LABELS[knob]}={shown}: {worse}, mostly {why} "
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


def _boundary_crossed(ev: Evaluated, tp: float) -> str | None:
    """What a TP group of `tp` ranks leaves: the node, or a rack's NVLink domain."""
    system = hardware.cluster(ev.gpu, ev.system).system
    if tp <= system.scale_up_accelerators:
        return None
    if system.scale_up_domain_accelerators:
        return f"the {system.scale_up_accelerators}-GPU NVLink domain"
    return "the node boundary"


def _knob_value(knob, value):
    if knob == "recompute":
        # 1.5: Megatron's --recompute-num-layers, full on some layers and selective on
        # the rest (recompute_knob: codes between 1 and 2)
        return {0.0: "none", 1.0: "selective", 1.5: "full on part of the layers",
                2.0: "full"}[float(value)]
    if knob in ("sp", "tp_overlap", "ep_overlap", "etp"):
        return "on" if value else "off"
    return int(value)


def left_out(evaluated, knobs: Knobs, arch, job) -> list[str]:
    """A note for each accelerator of a comparison none of whose plans fits in memory: it
    would otherwise drop out of the results unexplained."""
    return [f"{ev.gpu} left out: " + _too_big(ev, ev.out["memory_bytes"].min(),
                                             ev.out["capacity_bytes"][0], knobs, arch,
                                             job).message
            for ev in evaluated if ev.out and not ev.out["fits"].any()]


def nothing_fits(evaluated, limits: Limits, knobs: Knobs, arch, job) -> InputError:
    mins = [(ev.out["memory_bytes"].min(), ev) for ev in evaluated if ev.out]
    need, ev = min(mins, key=lambda m: m[0])
    cap = ev.out["capacity_bytes"][0]
    if need > cap:
        return _too_big(ev, need, cap, knobs, arch, job)
    return limits_missed(evaluated, limits)


def _too_big(ev: Evaluated, need: float, cap: float, knobs: Knobs, arch: ModelArch,
             job: TrainingJob) -> InputError:
    """No plan fits: name the smallest plan, and as fixes only the levers it does not pull
    already (a pinned ZeRO stage or recompute shows as unused) and accelerators with room."""
    plan = plan_at(ev, int(np.argmin(ev.out["memory_bytes"])))
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
    roomy = {}  # the smallest accelerator of each family that holds the plan (no CPU host)
    for a in sorted(load_catalog().accelerators, key=lambda a: a.memory_bytes):
        if a.memory_bytes >= need and a.form_factor != "cpu":
            roomy.setdefault(a.name.split("-")[0], a.name)
    if roomy:
        fixes.append(f"an accelerator with {math.ceil(need / GiB)} GiB or more "
                     f"({', '.join(list(roomy.values())[:4])})")
    return InputError(f"no plan fits in memory: the smallest ({plan.describe()}) needs "
                      f"{need / GiB:.1f} GiB per accelerator, {ev.gpu} has {cap / GiB:.1f} GiB",
                      fix=", or ".join(fixes))
