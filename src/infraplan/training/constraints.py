"""What a scenario's constraints and objective did to the search: each limit named by its
field, and the plans a limit removed that would have ranked above the best."""

from __future__ import annotations

import numpy as np

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
