"""Provisioning: the rate a deployment must sustain, and the fewest replicas of a
candidate that sustain it within the SLOs.

One replica is simulated on its share of the stream when a router assigns requests to
R replicas at random (`traffic.generate`'s share_of: Poisson at rate / R; a bursty gamma
stream thins to a smoother one); more replicas never hurt latency, so the smallest R is
found by doubling then bisection. The cheapest candidates are then
re-simulated as whole deployments behind the least-outstanding-requests router. Every
simulation runs on a window long enough for its steady state (`window.simulate_steady`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

from infraplan.errors import InputError
from infraplan.serving.deployment import ResolvedReplica
from infraplan.serving.metrics import Slo, dropped_reasons, summarize
from infraplan.serving.scenario import ServeScenario
from infraplan.serving.traffic import mean_rate_per_s
from infraplan.serving.window import (MAX_WINDOW_REQUESTS, P99_SHARE, SETTLE_WORDS, SLO_KEYS,
                                      fewest_settling, simulate_steady, slo_confidence)
from infraplan.units import three_figures

if TYPE_CHECKING:
    from infraplan.serving.planner import Candidate

CONFIRMED = 3  # cheapest candidates re-simulated as whole deployments


def offered_load(scenario: ServeScenario, base_dir: Path | None,
                 rate_per_s: float | None = None) -> tuple[float, str]:
    """(the rate a deployment must sustain, what it is: 'offered' for a steady stream's
    mean, 'peak' for the scenario's peak_rate_per_s, 'curve peak' for a diurnal curve's
    top: capacity_summary's names); inf for an
    offline batch. `rate_per_s`: the planning rate when the caller has it already (a
    trace's is read from its file)."""
    if scenario.traffic.arrival.kind == "offline" and not scenario.peak_rate_per_s:
        return math.inf, "offered"
    rate = planning_rate(scenario, base_dir) if rate_per_s is None else rate_per_s
    if scenario.peak_rate_per_s:
        return rate, "peak"
    return rate, "curve peak" if scenario.traffic.arrival.kind == "diurnal" else "offered"


def planning_rate(scenario: ServeScenario, base_dir: Path | None) -> float:
    """The rate to provision for: the scenario's peak, the diurnal curve's top, or the mean."""
    if scenario.peak_rate_per_s:
        scenario.check_peak(base_dir)
        return scenario.peak_rate_per_s
    arrival = scenario.traffic.arrival
    if arrival.kind == "diurnal":
        return max(rate for _, rate in arrival.curve)
    rate = mean_rate_per_s(scenario.traffic, base_dir=base_dir)
    if not math.isfinite(rate):  # a trace whose requests all arrive at one instant
        raise InputError("traffic.arrival: every request of the trace arrives at the same "
                         "instant, so it has no rate to provision for",
                         fix="set peak_rate_per_s, or use simulate serve for a batch")
    return rate


def violations(summary: dict, slo: Slo) -> list[str]:
    """Each SLO a simulation's summary misses, and its dropped requests, in words. A
    latency no completed request has (TPOT of one-token outputs: NaN) misses nothing, as
    `summarize`'s attainment counts it."""
    out = []
    confidence = summary.get("slo_confidence", {})
    for name, field, key in SLO_KEYS:
        limit, value = getattr(slo, field), summary[key]["p99"]
        if limit is None:
            continue
        if value > limit:  # NaN compares False
            out.append(f"{name} {_beyond(value, limit)}")
        elif key in confidence and confidence[key]["bound_95"] > P99_SHARE:
            c = confidence[key]
            out.append(f"{name} {_within(value, limit)} on this run, but its stretches put "
                       f"up to {c['bound_95']:.1%} of requests over {_limit(limit)} (95% "
                       f"bound; {c['share_over']:.2%} on the run): too near to rely on")
    if summary["dropped"]:
        reasons = summary["dropped_by_reason"]
        why = next(iter(reasons)) if len(reasons) == 1 else dropped_reasons(summary)
        out.append(f"{summary['dropped']:,} request{'s' * (summary['dropped'] != 1)} dropped "
                   f"({why})")
    return out


def _limit(limit_s: float) -> str:
    return f"{limit_s * 1e3:g} ms" if limit_s < 1 else f"{limit_s:g} s"


def _within(value_s: float, limit_s: float) -> str:
    """'964 ms <= 1 s'."""
    scale, unit = (1e3, "ms") if limit_s < 1 else (1.0, "s")
    return f"{value_s * scale:.3g} {unit} <= {limit_s * scale:g} {unit}"


def _beyond(value_s: float, limit_s: float) -> str:
    """'12.34 ms > 12 ms': the value with the digits that tell it from the limit (rounded
    to 3 figures, 10.04 ms read '0.01 s > 0.01 s'); from 1,000 in grouped digits (9,200 ms,
    not 9.2e+03 ms); inf (nothing completed) as is."""
    scale, unit = (1e3, "ms") if limit_s < 1 else (1.0, "s")
    value = value_s * scale
    if math.isfinite(value) and value >= 1000:  # far past the limit: grouped, no exponent
        return f"{value:,.0f} {unit} > {limit_s * scale:g} {unit}"
    digits = 3
    while digits < 9 and f"{value:.{digits}g}" == f"{limit_s * scale:.{digits}g}":
        digits += 1
    return f"{value:.{digits}g} {unit} > {limit_s * scale:g} {unit}"


def per_replica_summary(scenario, resolved: ResolvedReplica, rate: float, replicas: int,
                        price: float | None, base_dir, capacity: float | None = None) -> dict:
    """One replica's share of the stream split over `replicas`, simulated and summarised;
    `price` per GPU-hour, None: the scenario's for `replicas` of them on whole instances.
    `capacity`: one replica's saturated rate, to lengthen the window to its steady state."""
    if price is None:
        price = scenario.deployment_price(resolved.deployment.model_copy(
            update={"replicas": replicas}))
    return judged(scenario, resolved.deployment.model_copy(update={"replicas": 1}), resolved,
                  rate, capacity, base_dir, price, share_of=replicas)[0]


def judged(scenario, dep, resolved, rate, capacity, base_dir, price, share_of: int = 1,
           at_least: int = 0) -> tuple[dict, int]:
    """(the summary of `dep` simulated on a steady window, with the SLOs' confidence
    bounds; the requests simulated). A run whose p99s are within their limits but whose
    bounds are not (`violations`) is run again on four times the requests, up to twice and
    to MAX_WINDOW_REQUESTS: its verdict is unsure, not failed. A bursty stream's stretches
    differ by the bursts they caught: twelve L40S met the SLOs of a gamma stream (cv 4) on
    100,000 requests, while short runs' bounds asked for 24."""
    slo, last = scenario.slo.to_slo(), 0
    for _ in range(3):
        result = simulate_steady(scenario, dep, resolved, rate, capacity, base_dir,
                                 share_of=share_of, at_least=at_least)
        summary = dict(summarize(result, slo=slo, usd_per_gpu_hour=price),
                       slo_confidence=slo_confidence(result, slo))
        n = len(result.requests)  # a trace is not lengthened: n stays
        if not (capacity and _unsure(summary, slo)) or n >= MAX_WINDOW_REQUESTS or n == last:
            break
        last, at_least = n, min(4 * n, MAX_WINDOW_REQUESTS)
    return summary, n


def _unsure(summary: dict, slo: Slo) -> bool:
    """Every p99 within its limit, some confidence bound not."""
    return all(summary[key]["p99"] <= getattr(slo, field) for _, field, key in SLO_KEYS
               if getattr(slo, field) is not None and key in summary["slo_confidence"]) \
        and bool(violations(summary, slo))


def fewest_replicas(scenario, resolved, rate, slo, max_replicas, price, base_dir,
                     capacity: float):
    """(replicas, summary at that count, simulations run, why none is enough)."""
    if capacity <= 0:
        return None, None, 0, "completes no request (see simulate serve)"
    need = fewest_settling(rate, capacity)
    if need > max_replicas:
        return None, None, 0, (f"needs {need} replicas to keep up with "
                               f"{three_figures(rate)} requests/s "
                               f"(one completes at most {capacity:.3g}/s; {SETTLE_WORDS}), "
                               f"over max_replicas {max_replicas}")
    count, summaries = 0, {}

    def ok(r: int) -> bool:
        nonlocal count
        if r < need:
            return False
        if r not in summaries:
            summaries[r] = per_replica_summary(scenario, resolved, rate, r, price, base_dir,
                                               capacity)
            count += 1
        return not violations(summaries[r], slo)

    hi = need
    while not ok(hi):
        if hi >= max_replicas:
            return None, summaries[hi], count, (f"misses the SLOs even with {max_replicas} "
                                                "replicas: "
                                                + "; ".join(violations(summaries[hi], slo)))
        hi = min(hi * 2, max_replicas)
    lo = hi // 2  # fails (or 0)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi, summaries[hi], count, ""


def rank_key(cand: Candidate) -> tuple:
    """Cheapest first (to the cent: a bill spread over the GPUs used, 6 x $3.9333, rounds
    apart from 8 x $2.95); at equal cost the lower p99 end-to-end latency (fp8 beside bf16
    on the same GPUs serves faster for the same money; 2 x 4 GPUs beside 3 x 2 on the same
    8-GPU instance), then fewer GPUs."""
    e2e_p99_s = cand.summary["e2e_s"]["p99"] if cand.summary else math.inf
    return (round(cand.usd_per_hour, 2), e2e_p99_s if math.isfinite(e2e_p99_s) else math.inf,
            cand.deployment.num_gpus)


def confirm_cheapest(scenario, candidates: list[Candidate], rate, slo,
                      base_dir) -> tuple[list[Candidate], int]:
    """The candidates ranked, the first CONFIRMED of them simulated as whole deployments.
    Confirming can add replicas, so a confirmed candidate may fall behind unconfirmed ones:
    re-rank and confirm the new leaders until the first CONFIRMED are all confirmed."""
    sims = 0
    while True:
        candidates.sort(key=rank_key)
        pending = [c for c in candidates[:CONFIRMED] if not c.confirmed]
        if not pending:
            return candidates, sims
        for cand in pending:
            sims += confirm_deployment(scenario, cand, rate, slo, base_dir)
            cand.confirmed = True


def confirm_deployment(scenario, cand: Candidate, rate, slo, base_dir) -> int:
    """Simulate the whole deployment behind its router: add replicas until it meets the
    SLOs, or take them away while it still does. The replica count came from one replica's
    share of a random split of the stream; a least-outstanding router pools the
    replicas' queues (join-the-shortest-queue beats random assignment; e.g. Harchol-Balter,
    Performance Modeling and Design of Computer Systems, ch. 24), so the deployment may
    meet the SLOs with fewer, and `simulate serve` of it would say so."""
    sims = 0
    capacity = cand.capacity_requests_per_s
    # below this count the replicas are loaded past saturation, or too near it to settle
    floor = fewest_settling(rate, capacity) if capacity else cand.deployment.replicas

    window = 0  # the requests the last count's steady state took: where the next starts

    def run(replicas: int) -> dict:
        nonlocal sims, window
        sims += 1
        dep = cand.deployment.model_copy(update={"replicas": replicas})
        summary, window = judged(scenario, dep, cand.resolved, rate, capacity, base_dir,
                                 scenario.deployment_price(dep), at_least=window)
        return summary

    replicas = cand.deployment.replicas
    summary = run(replicas)
    for _ in range(3):  # too few: add replicas
        if not violations(summary, slo):
            break
        replicas += 1
        summary = run(replicas)
    if not violations(summary, slo):
        for _ in range(4):  # enough: try one fewer while the SLOs hold
            if replicas - 1 < floor:
                break
            fewer = run(replicas - 1)
            if violations(fewer, slo):
                break
            replicas, summary = replicas - 1, fewer
    cand.deployment = cand.deployment.model_copy(update={"replicas": replicas})
    cand.summary = summary
    cand.usd_per_hour = summary["cost"]["usd_per_gpu_hour"] * cand.deployment.num_gpus
    return sims
