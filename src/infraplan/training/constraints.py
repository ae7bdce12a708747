"""What a scenario's constraints and objective did to the search: each limit named by its
field, and the plans a limit removed that would have ranked above the best."""

from __future__ import annotations

import numpy as np

from infraplan.errors import InputError
from infraplan.training.evaluated import Evaluated, Limits, objective_of, plan_at

# result column -> the constraints: field that limits it
LIMIT_FIELDS = {"time_to_train_s": "deadline_days", "gpu_hours": "budget_gpu_hours",
                "cost_usd": "budget_usd"}
OBJECTIVES = {"time": "time to train", "cost": "total cost"}


def limit_term(column: str, limit: float) -> str:
    """A limit as its field and value, as the scenario gives it: 'budget_usd $97,500'."""
    if column == "time_to_train_s":
        return f"deadline_days {limit / 86400:g}"
    money = "$" if column == "cost_usd" else ""
    return f"{LIMIT_FIELDS[column]} {money}{limit:,.0f}"


def constraint_terms(constraints) -> list[str]:
    """Each constraint given, as its field and value: 'budget_usd $97,500'."""
    c = constraints
    limits = Limits(None if c.deadline_days is None else c.deadline_days * 86400,
                    c.budget_gpu_hours, c.budget_usd)
    return [limit_term(column, limit) for column, limit, _ in limits.checks()]


def value_text(column: str, value: float) -> str:
    """A limited column's value as its limit reads: days (hours under a day), GPU-hours, $."""
    if column == "time_to_train_s":
        return (f"{value / 86400:,.1f} days" if value >= 86400
                else f"{value / 3600:,.3g} hours")
    return f"{value:,.0f} GPU-hours" if column == "gpu_hours" else f"${value:,.0f}"


def applied_note(constraints, objective: str) -> list[str]:
    """The objective and constraints the ranking applied, when the scenario sets either
    (the default, time with no limit, goes without saying)."""
    terms = constraint_terms(constraints)
    if not terms and objective == "time":
        return []
    within = f" within {' and '.join(terms)}" if terms else ", no constraints"
    return [f"ranked by {OBJECTIVES[objective]} (objective: {objective}){within}"]


def removed_notes(evaluated: list[Evaluated], limits: Limits, objective: str,
                  best_score: float) -> list[str]:
    """For each limit, the fitting plans better by `objective` than the best plan that it
    ruled out, with the best of them and how far past the limit it is: otherwise a slower
    'best' plan looks like the search's own choice."""
    better = {"time": "faster", "cost": "cheaper"}[objective]
    notes = []
    for column, limit, _ in limits.checks():
        count, top = 0, None  # top: (score, ev, row)
        for ev in evaluated:
            if column not in ev.out:
                continue
            score = objective_of(ev, objective)
            rows = np.flatnonzero(ev.out["fits"] & (ev.out[column] > limit)
                                  & (score < best_score))
            count += len(rows)
            if len(rows):
                i = int(rows[np.argmin(score[rows])])
                if top is None or score[i] < top[0]:
                    top = (float(score[i]), ev, i)
        if top is None:
            continue
        _, ev, i = top
        plan = plan_at(ev, i)
        shown = ("" if column == "time_to_train_s" or "time_to_train_s" not in ev.out
                 else f", {value_text('time_to_train_s', ev.out['time_to_train_s'][i])}")
        if objective == "cost" and column != "cost_usd" and "cost_usd" in ev.out:
            shown += f", {value_text('cost_usd', ev.out['cost_usd'][i])}"
        notes.append(f"{limit_term(column, limit)} removed {count:,} "
                     f"{better} plan{'s' * (count != 1)}, the {better.removesuffix('er')}est "
                     f"of which ({plan.num_gpus:,} x {ev.gpu}, {plan.describe()}{shown}) "
                     f"{'takes' if column == 'time_to_train_s' else 'costs'} "
                     f"{value_text(column, float(ev.out[column][i]))}")
    return notes


# result column -> the plan nearest its limit, and what it does to the column
NEAREST = {"time_to_train_s": ("the fastest", "takes"),
           "gpu_hours": ("the one with the fewest GPU-hours", "needs"),
           "cost_usd": ("the cheapest", "costs")}
# result column -> what brings a plan within its limit
LIMIT_FIXES = {
    "time_to_train_s": "more or faster GPUs (hardware.max_count or hardware.counts, "
                       "hardware.gpus), fewer training.tokens, or a later "
                       "constraints.deadline_days",
    "gpu_hours": "a faster GPU (hardware.gpus), fewer training.tokens, or a larger "
                 "constraints.budget_gpu_hours",
    "cost_usd": "a cheaper GPU or pricing (hardware.gpus, prices, or pricing: spot or "
                "reserved), fewer training.tokens, or a larger constraints.budget_usd"}


def limit_given(column: str, limit: float) -> str:
    """A limit as the scenario sets it: 'constraints.budget_usd = $1,400'."""
    value = (f"{limit / 86400:g}" if column == "time_to_train_s"
             else f"${limit:,.0f}" if column == "cost_usd" else f"{limit:,.0f}")
    return f"constraints.{LIMIT_FIELDS[column]} = {value}"


def limits_missed(evaluated: list[Evaluated], limits: Limits) -> InputError:
    """No plan that fits meets the limits: each limit every fitting plan misses, with the
    plan nearest it (the cheapest for a budget in USD), what it costs or takes and by how
    much it misses, and the fixes for that limit. Limits some plan meets are not to blame
    and are left out; when each alone is met but no plan meets them all, each is named
    with the plan nearest it among those within the others."""
    fitting = [ev for ev in evaluated if ev.out and ev.out["fits"].any()]
    checks = [c for c in limits.checks() if any(c[0] in ev.out for ev in fitting)]
    missed = []  # (column, limit, the others it is within, (value, ev, row))
    for column, limit, _ in checks:
        near = _nearest(fitting, column, [ev.out["fits"] for ev in fitting])
        if near is not None and near[0] > limit:
            missed.append((column, limit, [], near))
    together = not missed
    for column, limit, _ in checks if together else []:
        others = [(c, lim) for c, lim, _ in checks if c != column]
        masks = [ev.out["fits"] & np.logical_and.reduce(
            [ev.out[c] <= lim for c, lim in others if c in ev.out], initial=True)
            for ev in fitting]
        near = _nearest(fitting, column, masks)
        if near is not None:
            missed.append((column, limit, [LIMIT_FIELDS[c] for c, _ in others], near))
    if not missed:  # three limits, no two of which one plan meets
        return InputError(f"no plan meets any two of the {' and '.join(c[2] for c in checks)}, "
                          "although each alone is met; relax the limits or allow more or "
                          "other GPUs")
    named = checks if together else missed
    nearest = []
    for column, limit, others, (value, ev, i) in missed:
        plan = plan_at(ev, i)
        best, verb = NEAREST[column]
        within = f"within {' and '.join(others)}, " if others else ""
        miss = (f"{percent(value / limit - 1)}" if value < 2 * limit
                else f"{value / limit:,.3g} times the limit")
        nearest.append(f"{within}{best}, {plan.num_gpus:,} x {ev.gpu} ({plan.describe()}), "
                       f"{verb} {value_text(column, value)} ({miss})")
    fixes = [LIMIT_FIXES[m[0]] for m in missed]
    return InputError(f"no plan meets {' and '.join(limit_given(m[0], m[1]) for m in named)}"
                      f"{' together' if together else ''}: {'; '.join(nearest)}",
                      fix="; or ".join(fixes))


def _nearest(evaluated: list[Evaluated], column: str, masks):
    """(value, ev, row) of the plan with the lowest `column` that a mask selects (None:
    no plan)."""
    best = None
    for ev, mask in zip(evaluated, masks, strict=True):
        if column not in ev.out or not mask.any():
            continue
        rows = np.flatnonzero(mask)
        i = int(rows[np.argmin(ev.out[column][rows])])
        if best is None or ev.out[column][i] < best[0]:
            best = (float(ev.out[column][i]), ev, i)
    return best


def percent(change: float) -> str:
    """A relative change, to a tenth of a percent under 1 %: +0.4 % is not "+0%"."""
    return f"{change:+.1%}" if abs(change) < 0.01 else f"{change:+.0%}"
