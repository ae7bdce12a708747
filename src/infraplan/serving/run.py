"""One serving scenario's deployment under its traffic, as `infraplan simulate serve`
runs it: the requests its seed generates, its SLOs and its price.

    import infraplan as ip
    serve = ip.load_scenario("examples/serve-llama8b-chat.yaml", ip.ServeScenario)
    run = ip.simulate_scenario(serve)
    run["summary"]["ttft_s"]["p99"], run["summary"].get("cost")
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from infraplan.errors import InputError
from infraplan.serving.curve_price import curve_price
from infraplan.serving.metrics import dropped_warning, require_completions, summarize
from infraplan.serving.simulate import simulate
from infraplan.serving.traffic import HOUR_S, generate, rates_at
from infraplan.serving.window import short_window_note


def price_or_note(scenario, dep) -> tuple[float | None, str | None]:
    """(the scenario's price of a GPU-hour of `dep`, its replicas on whole instances, None),
    or (None, why there is none, with the fix)."""
    try:
        return scenario.deployment_price(dep), None
    except InputError as exc:
        return None, str(exc)


def simulate_scenario(scenario, base_dir: Path | None = None, arch=None,
                      progress=None) -> dict:
    """`infraplan simulate serve`: the scenario's deployment under its traffic. A price
    that cannot be found leaves the cost out, with `price_note` saying why: the latency
    and throughput do not depend on it."""
    dep = scenario.deployment_spec(arch)
    requests = generate(scenario.traffic, seed=scenario.seed, base_dir=base_dir)
    result = simulate(dep, requests, base_dir=base_dir, arch=arch, progress=progress)
    try:
        (price, basis), note = scenario.deployment_priced(dep), None
    except InputError as exc:
        price, basis, note = None, None, str(exc)
    summary = summarize(result, slo=scenario.slo.to_slo(), usd_per_gpu_hour=price)
    if "cost" in summary:
        summary["cost"]["price_basis"] = basis  # where the price came from
        curve = curve_cost(scenario, dep, base_dir)
        if curve is not None:
            summary["cost"]["curve"] = curve
    require_completions(summary)
    return {"deployment": dep, "result": result, "summary": summary, "rate_per_s": None,
            "label": "the scenario's deployment", "price_note": note}


def curve_cost(scenario, dep, base_dir: Path | None = None) -> dict | None:
    """A diurnal scenario's price per output token over the whole day's curve: a month of
    the deployment over a month of the curve's output (curve_price.py). The simulation
    covers some hours of the day only, so its own $/M prices the load of those hours.
    None for a constant rate."""
    if scenario.traffic.arrival.kind != "diurnal":  # no month to price
        return None
    return curve_price(scenario, scenario.monthly_economics(dep)["cost"]["total_usd"],
                       base_dir)


# A diurnal run whose arrival rate, over the hours it covers, stays within this ratio of its
# lowest is judged as a stationary stream at its mean rate: the window formulas (window.py)
# assume one load, and a rate within 10% moves the M/M/1 window need at 70% load by under
# a third, less than the WINDOW_SLACK-rounded count it prints would show.
FLAT_RATIO = 1.1


def dropped_note(sim: dict) -> str | None:
    """metrics.dropped_warning of a simulate_scenario run: when most of its requests were
    dropped, what its figures describe and why (None otherwise)."""
    requests = sim["result"].requests
    return dropped_warning(sim["summary"], float(
        (requests.input_tokens + requests.output_tokens).mean()))


def window_note(scenario, result, capacity: dict) -> list[str]:
    """[short_window_note's] for a stream simulated too briefly for the load it was offered
    (capacity_summary's simulated_utilization: the run's own rate, not a planned peak it
    did not simulate), else []. A diurnal run counts when its hours are flat enough
    (FLAT_RATIO) to be a stationary stream; one spanning the curve's changes has no single
    load to judge its window by."""
    traffic = scenario.traffic
    kind = traffic.arrival.kind
    if kind not in ("poisson", "gamma", "trace", "diurnal") or (
            kind == "diurnal" and not _flat_hours(traffic.arrival, result.requests)):
        return []
    length = ("trace" if kind == "trace" else
              "duration_s" if traffic.duration_s is not None else "num_requests")
    short = short_window_note(result, capacity["simulated_utilization"], length)
    return [short] if short else []


def _flat_hours(arrival, requests) -> bool:
    """The diurnal curve's rate over the run's arrivals (seconds from its start_hour) varies
    within FLAT_RATIO."""
    if not len(requests):
        return False
    t_s = arrival.start_hour * HOUR_S + np.linspace(0.0, float(requests.arrival_s.max()), 257)
    rates = rates_at(arrival, t_s)
    return bool(rates.min() > 0 and rates.max() <= FLAT_RATIO * rates.min())


def simulation_json(scenario, sim: dict, capacity: dict, *, timeline: bool = True) -> dict:
    """What `simulate serve --json` prints of `sim` (simulate_scenario's): the summary,
    the capacity, the seed, the resolved settings, the notes (a missing price's among
    them) and, with `timeline`, the deployment's queue, running sequences and KV blocks in
    use over time (simulate._merge_timelines)."""
    result = sim["result"]
    warning = dropped_note(sim)  # the run's figures are of the few that completed: first
    notes = [warning] if warning else []
    notes += scenario.simulation_notes(result.requests, result.replica.arch)
    notes += window_note(scenario, result, capacity)
    if sim["price_note"]:
        notes.append(f"no cost: {sim['price_note']}")
    data = {**sim["summary"], "capacity": capacity, "seed": scenario.seed,
            "deployment": result.replica.settings(), "notes": notes}
    if timeline:
        data["timeline"] = {k: v.tolist() for k, v in result.timeline.items()}
    return data
