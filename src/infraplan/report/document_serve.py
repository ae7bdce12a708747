"""The document of a serving scenario: the simulation `infraplan simulate serve` runs, the
plan `infraplan plan serve` makes, latency CDFs, memory per accelerator, a load sweep and
the cost, under the SCALE and DEPLOY headings.

The simulation is the CLI's call for call (same requests, seed, SLOs and price), so its
numbers equal `simulate serve --json`; the plan is `plan_serving(scenario)` itself.
"""

from __future__ import annotations

import math
from pathlib import Path

from infraplan.catalog import load_catalog
from infraplan.errors import InputError
from infraplan.report import figures as fig
from infraplan.report.document import (item, limit_ms, ms, ms_column, ordered, section, table,
                                       usd)
from infraplan.report.serving import LOAD_NOTE, share_text
from infraplan.report.training import economics_notes
from infraplan.serving.capacity import accepted_share, capacity_summary
from infraplan.serving.curve_price import CURVE_LABEL, curve_usd_per_million_output
from infraplan.serving.metrics import dropped_reasons, latencies, output_rate, summarize
from infraplan.serving.nearby import nearby_list
from infraplan.serving.planner import plan_serving
from infraplan.serving.provision import offered_load, planning_rate, violations
from infraplan.serving.run import dropped_note, price_or_note, simulate_scenario, \
    simulation_json, window_note
from infraplan.serving.simulate import simulate
from infraplan.serving.traffic import generate
from infraplan.serving.window import settles, simulate_steady
from infraplan.serving.window import stationary_stream as stream_at
from infraplan.units import duration_text, three_figures

SWEEP_FRACTIONS = (0.25, 0.5, 0.75, 1.0, 1.25)
# where the capacity is far above the planning rate, the sweep goes on to these shares of it:
# the headroom is what a reader asks of a lightly loaded deployment, and 125% of its rate
# tells nothing of it
CAPACITY_FRACTIONS = (0.5, 0.75, 0.9)


def sweep_fractions(rate_per_s: float, capacity_per_s: float) -> tuple[float, ...]:
    """SWEEP_FRACTIONS of the planning rate, then CAPACITY_FRACTIONS of the capacity past
    its last one."""
    if not math.isfinite(capacity_per_s) or rate_per_s <= 0:
        return SWEEP_FRACTIONS
    beyond = [f * capacity_per_s / rate_per_s for f in CAPACITY_FRACTIONS]
    return SWEEP_FRACTIONS + tuple(f for f in beyond if f > 1.1 * SWEEP_FRACTIONS[-1])
SWEEP_REQUESTS = 1500  # requests a load-sweep point runs past (or too near) capacity
SLO_NAMES = {"ttft_p99_s": "TTFT", "tpot_p99_s": "TPOT", "e2e_p99_s": "end to end"}
CAPACITY_NOTE = ("Capacity: the most requests a second the deployment completes on these "
                 "lengths, every request queued at the start (a saturated run); a queue is "
                 "stable only below it. Throughput in the run: completions over the run, "
                 "from the first arrival to the last completion, as vLLM's benchmark counts "
                 "them; the drain after the last arrival keeps it below the offered rate even "
                 "where the deployment keeps up.")


def _per_million(cand) -> str:
    usd = cand.usd_per_million_output()
    return "-" if usd is None else f"${usd:,.3f}"


def _lengthened(scenario, simulated: int, plan) -> str:
    """Why a plan's run holds more requests than the scenario asks (window.simulate_steady)."""
    asked = scenario.traffic.num_requests
    if plan is None or not asked or simulated <= asked:
        return ""
    return (f" (the scenario asks {asked:,}; the plan runs each candidate until its queue "
            "reaches the steady state at its load)")


def simulate_best(scenario, plan, base_dir: Path | None = None) -> dict:
    """The plan's chosen deployment under the traffic at the planning rate."""
    cand = plan.best
    # on the window the planner confirmed it on (its steady state at this load)
    result = simulate_steady(scenario, cand.deployment, cand.resolved, plan.rate_per_s,
                             cand.capacity_requests_per_s, base_dir)
    price, note = price_or_note(scenario, cand.deployment)
    summary = summarize(result, slo=scenario.slo.to_slo(), usd_per_gpu_hour=price)
    return {"deployment": cand.deployment, "result": result, "summary": summary,
            "rate_per_s": plan.rate_per_s, "label": "the planned deployment at the planning "
            "rate", "price_note": note,
            # the planner measured it (its load column uses it): not simulated again
            "capacity_per_replica_s": cand.capacity_requests_per_s}


def load_sweep(scenario, sim: dict, rate_per_s: float, base_dir: Path | None = None,
               fractions=None, max_requests: int = SWEEP_REQUESTS,
               capacity_per_s: float = math.inf) -> list[dict]:
    """The simulated deployment at fractions of `rate_per_s` (None: sweep_fractions').
    Below the deployment's capacity (`capacity_per_s`, all replicas) a point runs on the
    steady-state window the planner uses (window.simulate_steady: a short run from empty
    engines reads its p99s low, and the sweep's verdicts would then disagree with plan
    serve's); past capacity, or too near it to settle (window.settles), on at most
    `max_requests`, whose queue only shows that it grows.
    A point's sustained rate is the long-run throughput of a queue: the offered rate while
    it is below the deployment's capacity, the capacity above it (Kleinrock, Queueing
    Systems I, Sec. 2.1); a short run's own count lags it by the requests still in flight
    when arrivals stop."""
    slo = scenario.slo.to_slo()
    dep, resolved = sim["deployment"], sim["result"].replica
    points = []
    for f in fractions or sweep_fractions(rate_per_s, capacity_per_s):
        rate = rate_per_s * f
        load = rate / capacity_per_s
        steady = math.isfinite(capacity_per_s) and settles(load)
        if steady:
            result = simulate_steady(scenario, dep, resolved, rate,
                                     capacity_per_s / dep.replicas, base_dir)
        else:
            traffic = stream_at(scenario.traffic, rate, base_dir=base_dir)
            n = min(traffic.num_requests or max_requests, max_requests)
            traffic = traffic.model_copy(update={"num_requests": n, "duration_s": None})
            result = simulate(dep, generate(traffic, seed=scenario.seed, base_dir=base_dir),
                              resolved=resolved)
        s = summarize(result, slo=slo)
        keeps_up = load < 1
        points.append({"fraction": f, "rate_per_s": rate, "requests": len(result.requests),
                       "requests_per_s": s["throughput"]["requests_per_s"],
                       "sustained_requests_per_s": min(rate, capacity_per_s),
                       "keeps_up": keeps_up, "steady_window": steady,
                       "output_tokens_per_s": s["throughput"]["output_tokens_per_s"],
                       "ttft_p99_s": s["ttft_s"]["p99"], "tpot_p99_s": s["tpot_s"]["p99"],
                       "e2e_p99_s": s["e2e_s"]["p99"],
                       # over capacity the queue grows past any SLO, however short a run
                       # shows it; too near it, no run settles (as the planner never plans
                       # a replica count there)
                       "meets_slo": steady and not violations(s, slo)})
    return points


def _per_million_basis(summary: dict, hourly_usd: float, month_usd: float,
                       curve: float | None) -> str:
    """How a $/M output tokens figure is made, from figures the page shows: the compute
    cost an hour over the output an hour at the simulated rate (while requests arrive,
    metrics.steady_rates, else over the whole run), or a month's cost over a month of the
    diurnal curve's output (curve_price.py)."""
    if curve is not None:
        return (f"the month's {usd(month_usd)} over {month_usd / curve:,.0f} million output "
                "tokens of a month of the curve")
    rate, when = output_rate(summary)
    return (f"{usd(hourly_usd)}/h / ({rate:,.0f} output tok/s {when} x 3,600 s) x 1,000,000")


def _memory_bar(label: str, replica) -> dict:
    m = replica.memory
    return {"label": label, "weights_bytes": m.weight_bytes,
            "activations_bytes": m.activation_bytes, "kv_bytes": m.kv_bytes,
            "overhead_bytes": m.overhead_bytes, "capacity_bytes": m.device_bytes}


def _highest_meeting(points: list[dict], ok: list[dict]) -> str:
    """The sweep's highest load that met the SLOs, saying when the sweep ended before
    the SLOs broke or broke them at its lowest."""
    if not ok:
        return (f"none swept: missed at {three_figures(points[0]['rate_per_s'])} "
                "requests/s, the lowest")
    text = f"{three_figures(ok[-1]['rate_per_s'])} requests/s"
    return text + " or more (the highest swept)" if ok[-1] is points[-1] else text


def _meets_cell(point: dict, slo_set: bool) -> str:
    over = " (over capacity)" if not point["keeps_up"] else "" if point["steady_window"] \
        else " (too near capacity to measure)"
    if not slo_set:
        return "no SLO set" + over
    return "yes" if point["meets_slo"] else "no" + over


def _headroom(points: list[dict], ok: list[dict], replicas: int) -> str:
    """How far above the planning rate the sweep still met the SLOs, and where it missed
    them: 'none' when it missed them at or below the planning rate."""
    on = f"on {replicas} replica{'s' * (replicas != 1)}"
    if not ok:
        return f"none {on}: missed at {points[0]['fraction']:.0%} of the planning rate, " \
               "the lowest swept"
    top = ok[-1]
    above = [p for p in points if p["fraction"] > top["fraction"]]
    missed = f", missed at {_share(above[0])}" if above else " or more (the highest swept)"
    if top["fraction"] < 1:
        return f"none {on}: met up to {_share(top, True)}{missed}"
    return f"{_share(top, True)}{missed} {on}"


def _share(point: dict, whole: bool = False) -> str:
    """'75%' ('75% of the planning rate'), or for a sweep point far past the planning
    rate '6.2x (31 requests/s)' ('6.2x the planning rate (31 requests/s)')."""
    f = point["fraction"]
    if f < 2:
        return f"{f:.0%}" + " of the planning rate" * whole
    return f"{f:.2g}x" + " the planning rate" * whole + \
        f" ({three_figures(point['rate_per_s'])} requests/s)"


def _describe(dep) -> str:
    return f"{dep.shape()}, {dep.engine}, weights {dep.weight_dtype}" \
        + (f", KV {dep.kv_dtype}" if dep.kv_dtype else "") + dep.speculation()


def _length(spec) -> str:
    if spec is None:
        return "from the trace"
    if spec.kind == "fixed":
        return f"{spec.value:,} tokens"
    if spec.kind == "uniform":
        return f"uniform {spec.low:,}-{spec.high:,} tokens"
    return f"lognormal, mean {spec.mean:,.0f} tokens, sigma {spec.sigma:g}"


def _latency_table(summary: dict) -> dict:
    # one unit per row, each row one quantity
    return table("latency", ["", "mean", "p50", "p90", "p99"],
                 [[label, *ms_column([summary[key][k] for k in ("mean", "p50", "p90", "p99")])]
                  for label, key in (("time to first token", "ttft_s"),
                                     ("time per output token", "tpot_s"),
                                     ("end to end", "e2e_s"))])


def serving_document(scenario, *, base_dir: Path | None = None, plan=True,
                     simulate_deployment: bool = True, sweep: bool = True,
                     sweep_requests: int = SWEEP_REQUESTS, progress=None,
                     arch=None) -> dict:
    """Plan (when the scenario has `search` and `plan` is true, or `plan` is a ServePlan),
    simulate (the scenario's deployment, else the plan's choice), sweep the load."""
    if plan is True:
        plan = plan_serving(scenario, base_dir=base_dir, progress=progress, arch=arch) \
            if scenario.search else None
    plan = plan or None
    sim = None
    if simulate_deployment and scenario.deployment is not None:
        sim = simulate_scenario(scenario, base_dir, arch)
    elif plan is not None and plan.best is not None:
        sim = simulate_best(scenario, plan, base_dir)
    if sim is None and plan is None:
        raise InputError("a serving report needs a deployment (to simulate) or a search "
                         "(to plan)", fix="add deployment: {gpu: h100} or search: {gpus: "
                                          "[h100]}")
    figures, s, slo = {}, {}, scenario.slo.to_slo()
    slo_set = bool(slo.given())  # without one every request "meets" it: the views say so
    rate = plan.rate_per_s if plan is not None else None
    if rate is None and scenario.traffic.arrival.kind != "offline":
        rate = planning_rate(scenario, base_dir)
    points, ok = [], []  # the sweep, and its points that met the SLOs
    if sim is not None:
        summary, dep, result = sim["summary"], sim["deployment"], sim["result"]
        figures["latency_cdf"] = fig.latency_cdf_figure(latencies(result))
        bars = [_memory_bar(_describe(dep), result.replica)]
        if plan is not None:  # each other configuration, not the simulated one again
            shown = (result.replica.gpu.name, result.replica.memory)
            bars += [_memory_bar(c.describe(), c.resolved) for c in plan.ranked[:4]
                     if c.resolved is not None
                     and (c.resolved.gpu.name, c.resolved.memory) != shown]
        figures["memory"] = fig.memory_figure(bars)
        offered, what = offered_load(scenario, base_dir, rate)
        capacity = capacity_summary(result.replica, result.requests, dep.replicas,
                                    offered, what, sim.get("capacity_per_replica_s"),
                                    accepted_share(summary), sim["rate_per_s"])
        if sweep and rate is not None and math.isfinite(rate):
            points = load_sweep(scenario, sim, rate, base_dir, max_requests=sweep_requests,
                                capacity_per_s=capacity["requests_per_s"])
            ok = [p for p in points if p["meets_slo"]]
            figures["load_sweep"] = fig.load_sweep_figure(points, slo)
        gpu = result.replica.gpu.name
        t, kv = summary["throughput"], summary["kv_cache"]
        s["Scale"] = section("SCALE", "Scale", items=[
            item("deployment", dep.model_dump(), _describe(dep)),
            item("accelerators", dep.num_gpus, f"{dep.num_gpus:,} x {gpu}"),
            item("planning rate", rate,
                 "-" if rate is None else f"{three_figures(rate)} requests/s"),
            item("requests simulated", summary["requests"], f"{summary['requests']:,}" + (
                f": {summary['completed']:,} completed, {summary['dropped']:,} dropped "
                f"({dropped_reasons(summary)})" if summary["dropped"] else "")
                + _lengthened(scenario, summary["requests"], plan))],
            # a plan's notes (Yield) name the model's uncounted towers and the checkpoint's
            # format; a lone simulation names them here. Which hours of a diurnal curve the
            # scenario's own run covers is said whenever that run is the one shown.
            paragraphs=[f"Simulated: {sim['label']}.",
                        *(f"WARNING: {w}" for w in [dropped_note(sim)] if w),
                        *(scenario.simulation_notes(result.requests, result.replica.arch)
                          if plan is None else scenario.window_notes(result.requests)
                          if sim["rate_per_s"] is None else ()),
                        *(window_note(scenario, result, capacity)
                          if sim["rate_per_s"] is None else ())])
        s["Compute"] = section("SCALE", "Compute", items=[
            item("throughput", t["requests_per_s"], f"{t['requests_per_s']:,.2f} requests/s"),
            item("output tokens per second", t["output_tokens_per_s"],
                 f"{t['output_tokens_per_s']:,.0f}"),
            # an engine steps whenever one request is in flight: a light load keeps it
            # stepping nearly all the time, so this is not the share of capacity used
            item("engines stepping", summary["gpu_busy_fraction"],
                 f"{summary['gpu_busy_fraction']:.1%} of the time (a batch of any size in "
                 "flight; capacity says how much more they could take)"),
            item("KV cache per replica", kv["capacity_tokens"],
                 f"{kv['capacity_tokens']:,} tokens"),
            item("KV cache use (mean / peak)", kv["mean_utilization"],
                 f"{kv['mean_utilization']:.1%} / {kv['peak_utilization']:.1%}")],
            figures=["memory"])
        system = load_catalog().system_for(gpu)
        s["Accelerator interconnect"] = section(
            "SCALE", "Accelerator interconnect",
            items=[item("tensor parallel per replica", dep.tp,
                        f"{dep.tp} GPUs over {system.intra_node_fabric} "
                        f"({system.intra_node_bandwidth_bytes_per_s_per_direction / 1e9:,.0f}"
                        " GB/s per GPU each way)")] if dep.tp > 1 else (),
            not_applicable=None if dep.tp > 1 else "each replica runs on one accelerator "
                                                   "(TP 1): no collectives")
        att = summary["slo_attainment"]
        s["Latency & locality"] = section("SCALE", "Latency & locality", items=[
            item("p99 time to first token", summary["ttft_s"]["p99"],
                 ms(summary["ttft_s"]["p99"])),
            item("p99 time per output token", summary["tpot_s"]["p99"],
                 ms(summary["tpot_s"]["p99"])),
            item("p99 end to end", summary["e2e_s"]["p99"], ms(summary["e2e_s"]["p99"])),
            item("requests meeting every SLO", att if slo_set else None,
                 f"{att:.1%}" if slo_set else "no SLO set")],
            tables=[_latency_table(summary)], figures=["latency_cdf"],
            paragraphs=[f"The latencies are of the {summary['completed']:,} completed "
                        f"requests; the {summary['dropped']:,} dropped got no token"
                        + (" and count as missing every SLO." if slo_set else ".")]
            if summary["dropped"] else ())
        econ, econ_tables, econ_fig, notes = [], [], [], []
        if "cost" in summary:
            c = summary["cost"]
            month = scenario.monthly_economics(dep)
            items = fig.cost_items(month)
            notes = economics_notes(month, "energy over the month")
            figures["cost"] = fig.cost_figure(items, "Cost per month (30.44 days) by line item")
            # a diurnal curve's: the month's bill over its tokens, as plan serve's table
            # (the plan's figure when this is its choice), else at the simulated rate
            best = plan.best if plan is not None and plan.best is not None else None
            curve = (best.curve_usd_per_million_output
                     if best is not None and best.deployment == dep else
                     curve_usd_per_million_output(scenario, fig.total_usd(items), base_dir))
            per_million = c["usd_per_million_output_tokens"] if curve is None else curve
            hourly = dep.num_gpus * c["usd_per_gpu_hour"]
            econ = [item("compute cost per hour", hourly, usd(hourly)),
                    item("cost per million output tokens"
                         + ("" if curve is None else f" {CURVE_LABEL}"), per_million,
                         f"${per_million:,.3f}: " + _per_million_basis(
                             summary, hourly, fig.total_usd(items), curve)),
                    item("cost per month (30.44 days)", fig.total_usd(items),
                         usd(fig.total_usd(items)))]
            econ_tables = [table("cost line items (a month of 30.44 days)",
                                 ["item", "USD", "basis"],
                                 [[i["item"], usd(i["usd"]), i["basis"]] for i in items])]
            econ_fig = ["cost"]
        elif sim["price_note"]:
            notes = [sim["price_note"]]
        s["Economics"] = section("SCALE", "Economics", items=econ, tables=econ_tables,
                                 figures=econ_fig, paragraphs=notes)
        s["Estimate throughput"] = section("DEPLOY", "Estimate throughput", items=[
            item("capacity", capacity["requests_per_s"], capacity["text"]),
            item("throughput in the run", t["requests_per_s"],
                 f"{t['requests_per_s']:,.2f} requests/s"),
            item("goodput (all SLOs met)",
                 summary["goodput_requests_per_s"] if slo_set else None,
                 f"{summary['goodput_requests_per_s']:,.2f} requests/s" if slo_set
                 else "no SLO set"),
            item("total tokens per second", t["total_tokens_per_s"],
                 f"{t['total_tokens_per_s']:,.0f}")], paragraphs=[CAPACITY_NOTE])
    if points:
        counts = sorted({p["requests"] for p in points})
        per_point = f"{counts[0]:,}" if len(counts) == 1 else \
            f"{counts[0]:,} to {counts[-1]:,}"
        s["Load-test"] = section("DEPLOY", "Load-test", tables=[table(
            f"simulated load sweep ({per_point} requests a point; the run above has "
            f"{summary['requests']:,}, so its p99s differ a little at the same load)",
            ["offered requests/s", "sustained requests/s",
                                     "completions/s in the run", "p99 TTFT", "p99 TPOT",
                                     "p99 end to end", "meets SLOs"],
            [[f"{p['rate_per_s']:,.3g}", f"{p['sustained_requests_per_s']:,.3g}",
              f"{p['requests_per_s']:,.2f}", ttft, tpot, e2e, _meets_cell(p, slo_set)]
             for p, ttft, tpot, e2e in zip(points, *(
                 ms_column([p[k] for p in points])  # one unit per column
                 for k in ("ttft_p99_s", "tpot_p99_s", "e2e_p99_s")), strict=True)])],
            figures=["load_sweep"],
            items=[item("highest load meeting the SLOs",
                        ok[-1]["rate_per_s"] if ok and slo_set else None,
                        _highest_meeting(points, ok) if slo_set else "no SLO set")])
    tr = scenario.traffic
    s["Define workload"] = section("DEPLOY", "Define workload", items=[
        item("model", scenario.model, scenario.model),
        item("arrivals", tr.arrival.kind, tr.arrival.kind + (
            f", {three_figures(tr.arrival.rate_per_s)} requests/s"
            if tr.arrival.rate_per_s else "")),
        item("requests", tr.num_requests, "-" if tr.num_requests is None
             else f"{tr.num_requests:,}"),
        item("prompt length", None, _length(tr.input)),
        item("output length", None, _length(tr.output)),
        item("random seed", scenario.seed, str(scenario.seed)),
        item("SLOs", scenario.slo.model_dump(), ", ".join(
            f"p99 {SLO_NAMES[k]} ≤ {limit_ms(v)}"
            for k, v in scenario.slo.model_dump().items() if v is not None) or "none")])
    yield_items, yield_paragraphs = [], []
    if plan is not None:
        s["Pick platform"] = section("DEPLOY", "Pick platform", items=[
            item("cheapest", plan.best.describe() if plan.best else None,
                 f"{plan.best.describe()} at {usd(plan.best.usd_per_hour)}/h" if plan.best
                 else plan.verdict)], tables=[table(
                     "configurations that meet the SLOs, cheapest first",
                     ["configuration", "GPUs", "$/hour", "p99 TTFT", "p99 TPOT",
                      "load", "$/M output tokens" + (f" {CURVE_LABEL}" if any(
                          c.curve_usd_per_million_output is not None for c in plan.ranked)
                          else "")],
                     [[c.listed(), c.gpus_text(), usd(c.usd_per_hour), ttft, tpot,
                       share_text(c.load_share(plan.rate_per_s)), _per_million(c)]
                      for c, ttft, tpot in zip(plan.ranked, *(  # one unit per column
                          ms_column([c.summary[k]["p99"] for c in plan.ranked])
                          for k in ("ttft_s", "tpot_s")), strict=True)])],
            paragraphs=[f"Rejected {c.describe()}: {c.reason}" for c in plan.rejected]
            + ([f"Outside the search, these hold the model: {nearby_list(plan.runnable_nearby)}"]
               if plan.runnable_nearby else [])
            + [LOAD_NOTE, *plan.unconfirmed_notes, *plan.price_notes,
               *plan.not_simulated_notes]
            + [f"{plan.simulations} simulations in {duration_text(plan.search_seconds)}"])
        yield_paragraphs += [f"note: {n}" for n in plan.notes]
    if points and sim is not None and slo_set:
        yield_items.append(item("headroom before the SLOs break",
                                ok[-1]["fraction"] if ok else None,
                                _headroom(points, ok, sim["deployment"].replicas)))
    s["Observe"] = section("DEPLOY", "Observe", not_applicable="no observed run is attached "
                           "to this plan")
    s["Yield plan"] = section("DEPLOY", "Yield plan", items=yield_items,
                              paragraphs=yield_paragraphs)
    return fig.json_safe({
        "kind": "serving", "title": scenario.name or f"{scenario.model} serving",
        "description": scenario.description, "model": scenario.model,
        # what simulate serve --json prints, but its per-event timeline (a report embeds
        # this document)
        "simulation": None if sim is None else dict(
            simulation_json(scenario, sim, capacity, timeline=False), simulated=sim["label"]),
        "plan": None if plan is None else dict(model=scenario.model, **plan.to_json()),
        "load_sweep": points, "sections": ordered(s), "figures": figures})
