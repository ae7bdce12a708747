"""Terminal views of serving runs: one simulation's metrics, a capacity plan."""

from __future__ import annotations

import math

from infraplan.units import duration_text
from infraplan.report.terminal import table
from infraplan.report.training import economics_lines
from infraplan.serving.curve_price import CURVE_LABEL
from infraplan.serving.metrics import output_rate
from infraplan.units import format_count

LOAD_NOTE = ("Load: the planning rate as a share of what the replicas complete saturated; "
             "well below 100%, the latency SLOs rather than throughput set the replica "
             "count.")


def share_text(value: float | None) -> str:
    """'42%', or '-' for a share there is none of."""
    return "-" if value is None else f"{value:.0%}"


def _ms(seconds: float) -> str:
    """'964.3 ms' below 10 s; past that, a unit that suits it ('81.8 min', not
    '4,908,236.6 ms'); '-' for a latency there is none of (NaN, or inf: none completed)."""
    if not math.isfinite(seconds):
        return "-"
    return f"{seconds * 1e3:,.1f} ms" if seconds < 10 else duration_text(seconds)


def simulation_report(name: str, describe: str, s: dict, notes: list[str] = (),
                      warning: str | None = None) -> str:
    """`warning`: what makes the run's figures unrepresentative (most requests dropped),
    shown under the headline."""
    t, kv = s["throughput"], s["kv_cache"]
    lines = [f"{name}: {describe}",
             *([f"WARNING: {warning}"] if warning else []),
             f"requests {s['requests']:,}: completed {s['completed']:,}, dropped "
             f"{s['dropped']:,}, preemptions {s['preemptions']:,}; makespan "
             f"{s['makespan_s']:,.1f} s, {format_count(s['steps'])} engine steps",
             *(f"  dropped {n:,}: {why}" for why, n in s["dropped_by_reason"].items()),
             *([f"  the latencies below are of the {s['completed']:,} completed requests; "
                "the dropped ones got no token"] if s["dropped"] else []), "",
             table(["latency", "mean", "p50", "p90", "p99"],
                   [[label, *(_ms(s[key][k]) for k in ("mean", "p50", "p90", "p99"))]
                    for label, key in (("time to first token", "ttft_s"),
                                       ("time per output token", "tpot_s"),
                                       ("end to end", "e2e_s"))], align_right=[1, 2, 3, 4]),
             "",
             f"throughput: {t['requests_per_s']:,.2f} req/s, {t['output_tokens_per_s']:,.0f} "
             f"output tok/s, {t['total_tokens_per_s']:,.0f} total tok/s"
             + (" (over the run, its drain included)"
                if "capacity" in s else "")
             + (f"; {s['steady']['output_tokens_per_s']:,.0f} output tok/s while requests "
                "arrive" if "steady" in s else ""),
             *([f"capacity: {s['capacity']['text']}"] if "capacity" in s else []),
             f"goodput (all SLOs met): {s['goodput_requests_per_s']:,.2f} req/s "
             f"({s['slo_attainment']:.1%} of requests"
             + (f"; the {s['dropped']:,} dropped count as missed)" if s["dropped"] else ")")
             if s.get("slo") else
             "goodput: no SLO set (slo: ttft_p99_s, tpot_p99_s, e2e_p99_s)",
             f"KV cache: {kv['capacity_tokens']:,} tokens per replica, mean use "
             f"{kv['mean_utilization']:.1%}, peak {kv['peak_utilization']:.1%}; engines "
             f"stepping {s['gpu_busy_fraction']:.1%} of the time"]
    if "queue" in s:
        lines.append(f"queue: {s['queue']['mean_waiting']:,.2f} requests waiting per "
                     f"replica on average over the run, at most {s['queue']['max_waiting']:,} "
                     "in one queue")
    if "cost" in s:
        c = s["cost"]
        basis = output_rate(s)[1]
        price = (f"${c['usd_per_gpu_hour']:.2f} per GPU-hour, {s['num_gpus']} "
                 f"GPU{'s' if s['num_gpus'] > 1 else ''}"
                 + (f"; {c['price_basis']}" if c.get("price_basis") else ""))
        simulated = (f"${c['usd_per_million_output_tokens']:,.3f} per million output tokens "
                     f"at the output rate {basis}")
        if "curve" in c:  # the simulated hours are not the day: the month's bill is
            curve = c["curve"]
            lines += [f"cost: ${curve['usd_per_million_output_tokens']:,.3f} per million "
                      f"output tokens {CURVE_LABEL}: the month's ${curve['month_usd']:,.0f} "
                      f"over {curve['month_output_tokens'] / 1e6:,.0f} million output tokens "
                      f"of a month of the curve ({price})",
                      f"      (the simulated hours alone: {simulated})"]
        else:
            lines.append(f"cost: {simulated} ({price})")
    lines += [f"note: {n}" for n in notes]
    return "\n".join(lines)


def plan_report(name: str, plan, seed: int) -> str:
    rows = []
    for c in plan.ranked:
        s = c.summary
        rows.append([c.listed(), c.gpus_text(), f"${c.usd_per_hour:,.2f}",
                     _ms(s["ttft_s"]["p99"]), _ms(s["tpot_s"]["p99"]),
                     share_text(c.load_share(plan.rate_per_s)),
                     f"${c.usd_per_million_output():,.3f}"])
    curve = any(c.curve_usd_per_million_output is not None for c in plan.ranked)
    lines = [f"{name}: {plan.notes[0]}; {plan.simulations} simulations in "
             f"{plan.search_seconds:.1f} s (seed {seed})", ""]
    if plan.best is None:
        lines.append(plan.verdict)
    else:
        lines += [f"cheapest: {plan.best.describe()} at ${plan.best.usd_per_hour:,.2f}/h", "",
                  table(["configuration", "GPUs", "$/hour", "p99 TTFT", "p99 TPOT",
                         "load", "$/M out tok" + (f" {CURVE_LABEL}" if curve else "")],
                        rows, align_right=[1, 2, 3, 4, 5, 6]),
                  LOAD_NOTE]
        lines += plan.unconfirmed_notes + plan.price_notes
        if plan.best.economics:
            lines += ["", "a month (30.44 days) of the cheapest, "
                      + economics_lines(plan.best.economics)[0]]
            lines += economics_lines(plan.best.economics)[1:]
    if plan.rejected:
        lines += ["", "rejected:", *_rejected_lines(plan.rejected)]
    lines += plan.not_simulated_notes
    lines += [f"note: {n}" for n in plan.notes[1:]]
    return "\n".join(lines)


def _listed(values) -> str:
    """'2, 4, 8': the distinct values, in order."""
    return ", ".join(str(v) for v in dict.fromkeys(values))


def _rejected_lines(rejected) -> list[str]:
    """One line per reason: configurations refused for the same reason (an accelerator
    without a price, at every TP and format) are named together, not each at length."""
    groups: dict[str, list] = {}
    for c in rejected:
        groups.setdefault(c.reason, []).append(c)
    lines = []
    for reason, cands in groups.items():
        if len(cands) == 1:
            lines.append(f"  {cands[0].describe()}: {reason}")
            continue
        deps = [c.deployment for c in cands]
        lines.append(f"  {len(cands)} configurations of {_listed(d.gpu for d in deps)} (TP "
                     f"{_listed(d.tp for d in deps)}; weights "
                     f"{_listed(d.weight_dtype for d in deps)}; kv "
                     f"{_listed(d.kv_dtype for d in deps)}"
                     + (f"; max_num_seqs {_listed(d.max_num_seqs for d in deps)}"
                        if any(d.max_num_seqs for d in deps) else "")
                     + f"): {reason}")
    return lines
