"""Terminal view of `simulate train`: the run of the best plan as distributions per pricing
strategy, the checkpoint plan behind them, and goodput against the checkpoint interval."""

from __future__ import annotations

from infraplan.report.terminal import table
from infraplan.units import format_bytes

LABELS = {"on_demand": "on-demand", "spot": "spot",
          "reserved_plus_spot": "reserved + spot burst"}


def _days(seconds: float) -> str:
    return f"{seconds / 86400:,.1f} d"


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:,.1f} min"


def run_report(name: str, sim) -> str:
    p, cp = sim.plan, sim.checkpoint
    prices = ", ".join(f"{k.replace('_', '-')} ${v:,.2f}"
                       for k, v in sim.prices_usd_per_gpu_hour.items())
    lines = [f"{name}: {p.plan.num_gpus} x {p.accelerator}, {p.plan.describe()}",
             f"work {_days(sim.work_s)} of failure-free compute; job MTBF "
             f"{sim.mtbf_s / 3600:,.2f} h; checkpoint {format_bytes(cp.size_bytes)} blocks "
             f"{cp.blocking_s:,.3g} s, durable after {cp.write_s:,.3g} s; restart "
             f"{_minutes(sim.restart_s)}",
             f"prices per GPU-hour: {prices}", ""]
    rows = []
    for key, d in sim.strategies.items():
        rows.append([LABELS[key], _minutes(d.interval_s) + f" ({d.interval_source})",
                     _days(d.wall_s.p50), _days(d.wall_s.p90), f"{d.goodput.p50:.1%}",
                     f"${d.cost_usd.p50:,.0f}", f"${d.cost_usd.p90:,.0f}",
                     f"{d.interruptions.mean:,.1f}", f"{d.preemptions.mean:,.1f}"])
    lines.append(table(["strategy", "checkpoint every", "wall p50", "wall p90", "goodput p50",
                        "cost p50", "cost p90", "interruptions", "of them preemptions"],
                       rows, align_right=[2, 3, 4, 5, 6, 7, 8]))
    base = sim.strategies.get("on_demand")
    if base is not None:
        for key, d in sim.strategies.items():
            if key != "on_demand":
                saving = 1 - d.cost_usd.mean / base.cost_usd.mean
                longer = d.wall_s.mean / base.wall_s.mean - 1
                money = f"{saving:.0%} cheaper" if saving >= 0 else f"{-saving:.0%} dearer"
                lines.append(f"{LABELS[key]}: {money} than on-demand (mean), "
                             f"{longer:+.0%} wall time")
    scan = next((d.scan for d in sim.strategies.values() if d.scan is not None), None)
    if scan is not None:
        lines += ["", "on-demand goodput vs checkpoint interval (Daly: "
                  f"{_minutes(scan.daly_interval_s)}):"]
        picks = range(0, len(scan.intervals_s), max(1, len(scan.intervals_s) // 8))
        lines.append("  " + "  ".join(f"{_minutes(scan.intervals_s[i])}: "
                                      f"{scan.mean_goodput[i]:.2%}" for i in picks))
    lines.append(f"{next(iter(sim.strategies.values())).trials:,} trials per strategy; costs "
                 "are compute only (plan train itemises storage and egress)")
    return "\n".join(lines)
