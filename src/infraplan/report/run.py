"""Terminal view of `simulate train`: the run of the best plan as distributions per pricing
strategy, the checkpoint plan behind them, and goodput against the checkpoint interval."""

from __future__ import annotations

import math

from infraplan.report.terminal import table
from infraplan.report.document import usd
from infraplan.units import duration_text, format_bytes, format_usd_rate, run_length

LABELS = {"on_demand": "on-demand", "spot": "spot",
          "reserved_plus_spot": "reserved + spot burst"}


def daly_text(daly_s: float, upload_s: float) -> str:
    """Daly's interval, and the upload it is raised to when shorter: 'Daly 17.6 s, raised
    to the 56.8 s upload: ...'."""
    if not math.isfinite(daly_s):
        return "Daly: none needed, no interruption loses work"
    if daly_s >= upload_s:
        return f"Daly {duration_text(daly_s)}"
    return (f"Daly {duration_text(daly_s)}, raised to the {duration_text(upload_s)} upload: "
            "a checkpoint cannot start before the last one is uploaded")


def decimals(fractions, least: int = 1) -> int:
    """Decimals of a percentage, at least `least`, so that no share short of 100% (or above
    0%) prints as 100% (0%): 0.99996 is '99.996%', not '100.0%'. At most 6."""
    need = least
    for f in fractions:
        while need < 6 and 0 < f < 1 and round(f * 100, need) in (0.0, 100.0):
            need += 1
    return need


STRATEGY_COLUMNS = ["strategy", "checkpoint every", "wall p50", "wall p90", "goodput p50",
                    "goodput p10", "cost p50", "cost p90", "interruptions mean", "preemptions mean"]
# what the columns' statistics are, under the table
COLUMNS_LINE = ("p50: the median trial; p90: 1 trial in 10 runs longer or costs more; "
                "goodput p10: 1 trial in 10 has less (the median trial of a rarely "
                "interrupted run has no failure); "
                "interruptions (failures and preemptions) and preemptions: means over the "
                "trials")


TERM_COLUMN = "reserved term, committed"  # only when a strategy reserves GPUs


def strategy_columns(sim) -> list[str]:
    """STRATEGY_COLUMNS, and the reserved GPUs' whole-term commitment when there is one."""
    return STRATEGY_COLUMNS + [TERM_COLUMN] * (sim.term is not None)


def strategy_rows(sim) -> list[list[str]]:
    """One row per pricing strategy of a RunSimulation, under strategy_columns(sim)."""
    runs = sim.strategies.values()
    rows, places = [], decimals([g for d in runs for g in (d.goodput.p50, d.goodput.p10)])
    for key, d in sim.strategies.items():
        rows.append([LABELS[key], duration_text(d.interval_s) + f" ({d.interval_source})",
                     run_length(d.wall_s.p50), run_length(d.wall_s.p90),
                     f"{d.goodput.p50:.{places}%}", f"{d.goodput.p10:.{places}%}",
                     usd(d.cost_usd.p50), usd(d.cost_usd.p90),
                     f"{d.interruptions.mean:,.1f}", f"{d.preemptions.mean:,.1f}"])
        if sim.term is not None:
            t = sim.term
            rows[-1].append(f"${t.committed_usd:,.0f} ({t.years} y, {t.reserved_gpus} GPUs)"
                            if key == "reserved_plus_spot" else "-")
    return rows


def price_lines(sim) -> list[str]:
    """Each strategy's price per GPU-hour, as billed (up to 6 significant digits:
    $6.155, not $6.16), and where it comes from."""
    return [f"{k.replace('_', '-')} ${format_usd_rate(v)}: {sim.price_sources[k]}"
            for k, v in sim.prices_usd_per_gpu_hour.items()]


def spot_lines(sim) -> list[str]:
    """The spot capacity's notice and preemption rate, and whose figures they are."""
    t = sim.spot_terms
    if t is None:
        return []
    whose = f"taken as {t['provider']}'s, the catalog's cheapest spot offer for {t['gpu']}" \
        if t["provider"] else f"the catalog has no spot offer for {t['gpu']}"
    return [f"spot capacity ({whose}): notice {t['notice_s']:g} s, {t['notice']}; preemptions "
            f"of {t['monthly_interrupted_fraction'] * 100:.3g}% of nodes a month, "
            f"{t['preemption_rate']}; capacity back after {run_length(t['capacity_wait_mean_s'])}"
            f" on average, restart {duration_text(t['restart_s'])}"]


def against_on_demand(sim) -> list[str]:
    """How much cheaper (or dearer) and longer each strategy runs than on-demand."""
    base, lines = sim.strategies.get("on_demand"), []
    if base is None:
        return lines
    for key, d in sim.strategies.items():
        if key != "on_demand":
            saving = 1 - d.cost_usd.mean / base.cost_usd.mean
            longer = d.wall_s.mean / base.wall_s.mean - 1
            money = f"{saving:.0%} cheaper" if saving >= 0 else f"{-saving:.0%} dearer"
            line = f"{LABELS[key]}: {money} than on-demand (mean), {longer:+.1%} wall time"
            if key == "reserved_plus_spot" and sim.term is not None:
                line += _term_clause(sim.term, base.cost_usd.mean)
            lines.append(line)
    return lines


def _term_clause(t, on_demand_usd: float) -> str:
    """The reserved strategy's saving counts only the run's hours of the reservation: say
    what it leaves out and what the strategy costs with the whole term (Commitment)."""
    with_term = t.with_term_usd.mean
    ratio = with_term / on_demand_usd
    compared = (f"{ratio:,.1f} x on-demand's ${on_demand_usd:,.0f}" if ratio >= 1 else
                f"{1 - ratio:.0%} cheaper than on-demand's ${on_demand_usd:,.0f}")
    return (f", excluding the ${t.committed_usd:,.0f} commitment, which pays only if the "
            f"{t.reserved_gpus} reserved GPUs are used for the rest of the {t.years}-year "
            f"term; counting it, ${with_term:,.0f} (mean), {compared}")


def interval_lines(sim) -> list[str]:
    """Why a strategy checkpoints less often than Daly's interval (not scanned)."""
    return [f"{LABELS[key]} checkpoints every {duration_text(d.interval_s)}: "
            f"{daly_text(d.daly_interval_s, d.interval_s)}"
            for key, d in sim.strategies.items() if d.interval_source == "upload"]


FEW_TRIALS = 100  # below this fewer than 10 trials lie beyond p10 and p90 each


def trials_line(sim) -> str:
    first = next(iter(sim.strategies.values()))
    few = "" if first.trials >= FEW_TRIALS else (
        " (too few to trust the tails: p10 and p90 need 10 trials beyond them each, and "
        f"equal p50 at 1 trial; set run.trials to {FEW_TRIALS} or more)")
    return (f"{first.trials:,} trial{'s' * (first.trials != 1)} per strategy{few}, seed "
            f"{first.seed}; costs are compute only (plan train itemises storage and egress)")


def run_report(name: str, sim) -> str:
    p, cp, setup = sim.plan, sim.checkpoint, sim.setup
    blocks = "blocks" if setup.asynchronous else "blocks (synchronous)"
    lines = [f"{name}: {p.plan.num_gpus} x {p.accelerator}, {p.plan.describe()}",
             f"work {run_length(sim.work_s)} of failure-free compute; job MTBF "
             f"{duration_text(sim.mtbf_s)}; checkpoint "
             f"{format_bytes(cp.size_bytes, binary=False)} to "
             f"{setup.tier.name} {blocks} {cp.blocking_s:,.3g} s, durable after "
             f"{cp.write_s:,.3g} s; restart {duration_text(sim.restart_s)}",
             f"failure rate: {setup.failures.derivation}" + (
                 "" if setup.failures_given else "; set run.failures_per_gpu_hour to "
                                                      "your fleet's rate"),
             "prices per GPU-hour:"]
    lines += ["  " + line for line in price_lines(sim)]
    lines += spot_lines(sim)
    lines.append("")
    lines.append(table(strategy_columns(sim), strategy_rows(sim),
                       align_right=[2, 3, 4, 5, 6, 7, 8, 9, 10]))
    lines.append(COLUMNS_LINE)
    lines += against_on_demand(sim)
    lines += interval_lines(sim)
    scanned = next(((k, d.scan) for k, d in sim.strategies.items() if d.scan is not None),
                   None)
    if scanned is not None:
        key, scan = scanned
        # the mean over trials, not the table's median: a run that is rarely interrupted
        # has a median trial with no failure, whose goodput is checkpointing's alone
        lines += ["", f"{LABELS[key]} mean goodput vs checkpoint interval "
                  f"({daly_text(scan.daly_interval_s, scan.upload_s)}):"]
        picks = range(0, len(scan.intervals_s), max(1, len(scan.intervals_s) // 8))
        places = decimals([scan.mean_goodput[i] for i in picks], least=2)
        lines.append("  " + "  ".join(f"{duration_text(scan.intervals_s[i])}: "
                                      f"{scan.mean_goodput[i]:.{places}%}" for i in picks))
    lines += [f"note: {note}" for note in sim.notes]
    lines.append(trials_line(sim))
    return "\n".join(lines)
