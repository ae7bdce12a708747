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
from infraplan.training.evaluate import AUTO_RECOMPUTE, TrainingJob
from infraplan.training.evaluated import Evaluated, Limits, breakdown, knob_column, plan_at
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


def why_rejected(arch, job, ev: Evaluated, best: int, limit: int = 4) -> list[str]:
    """For each knob, the best plan with another value of it and what made it lose: the
    memory it needs, or the part of the step that grew (compared at the best plan's GPU
    count when that count allows the value). Up to `limit` values per knob, the nearest."""
    out = ev.out
    objective = out.get("time_to_train_s", out["step_s"])
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
            j = int(np.flatnonzero(pool)[np.argmin(objective[pool])])
            slower = objective[j] / objective[best] - 1
            if not same_count[j]:
                reasons.append(f"{label}={shown}: {slower:+.0%}, best at {int(out['gpus'][j])} "
                               f"GPUs ({int(out['gpus'][best])} GPUs do not divide into it)")
                continue
            pending.append((len(reasons), knob, shown, j, slower))
            reasons.append("")  # filled in below, once the step breakdowns are known
    parts = breakdown(arch, job, ev, [best] + [p[3] for p in pending])
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
