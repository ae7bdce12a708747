"""Steady-state windows: how many requests a simulation needs before its percentiles are
the service's rather than its start's or its luck's.

Two measures set it.
- The queue. Near saturation a queue's excursions are long and slow to average out. In
  M/M/1 the time-average number in the system has asymptotic variance
  2 rho (1 + rho) / (1 - rho)^4 per unit time, in mean service times (Whitt 1989, "Planning
  queueing simulations", Management Science 35(11); Whitt 2006, "Analysis for design",
  Handbooks in OR & MS 13, ch. 13). Estimating its mean rho / (1 - rho) within +-eps at 95%
  confidence (z = 1.96) takes 2 z^2 (1 + rho) / (eps^2 rho (1 - rho)^2) service times, in
  which rho times as many requests arrive; `steady_requests`, with rho the load (the
  arrival rate over the saturated rate) and eps QUEUE_PRECISION. Such a run spans many
  relaxation times 1 / (mu (1 - sqrt(rho))^2) (Abate & Whitt 1987, Queueing Systems 2), so
  its start from an empty queue weighs little.
- The batch. An engine started empty holds fewer requests than it will until its long
  requests pile up: in an infinite-server queue started empty (Takacs), the occupancy at t
  is lambda * integral_0^t P(S > u) du, whose shortfall against the steady lambda E[S],
  summed over all t, is lambda E[S^2] / 2: the occupancy of E[S^2] / (2 E[S]) seconds, the
  size-biased sojourn. The drain after the last arrival mirrors it. Over a window of T
  seconds the batches are lighter than the service's by about E[S^2] / (E[S] T), which
  WINDOW_SOJOURNS keeps to 5%.

Measured on the chat example at 80 requests/s (lognormal outputs, mean 250, sigma 0.8):
3 x H100 at 97% of their saturated rate met a 50 ms p99 TPOT on 3,000 requests (36 ms) and
missed it on 30,000 and 100,000 (52 ms); 13 x L40S at 79% read 42-43 ms on 3,000 (three
seeds; a window of 3 E[S^2]/E[S]), 49-51 ms on 12,000 and 50-52 ms on 30,000 (20 of them).
One H100 (fp8, 128 sequences) at 92% read p99 TTFT 0.67 s on 5,000 requests, 1.0-1.6 s on
20,000 (four seeds) and about 2.05 s on 400,000; at 88%, 0.2-1.2 s on 25,000 and about 0.61 s
on 400,000. Even a long run's p99 wanders near saturation, so the planner also asks how far
it could wander (`slo_confidence`) before it trusts a p99 read within its limit.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from infraplan.serving.metrics import Slo, latencies
from infraplan.serving.simulate import SimResult, simulate
from infraplan.serving.traffic import ArrivalSpec, TrafficSpec, generate, mean_rate_per_s, \
    with_rate

DIURNAL_WINDOW_REQUESTS = 2000  # requests simulated at the peak of a day-long curve
QUEUE_PRECISION = 0.2  # eps: the mean queue within +-20% (95% confidence)
WINDOW_SOJOURNS = 20  # a window at least this many size-biased sojourns, E[S^2] / E[S]
# A window within this share of its need is long enough (18 sojourns: batches 6% light);
# one that is not is run again past its need by as much, since a longer window's heavier
# batches lengthen the sojourns it measures (from 13 to 18 s in the example above)
WINDOW_SLACK = 0.9
# A load whose window would pass this many requests is too near saturation to plan on
# (above about 93.9% of the saturated rate); a simulation of them takes about a second.
MAX_WINDOW_REQUESTS = 100_000


# Batch means (Law & Kelton, Simulation Modeling and Analysis, ch. 9; Schmeiser 1982: 10
# to 30 batches): the run's requests in this many consecutive stretches, each far longer
# than the queue's memory, whose shares over an SLO's limit are then nearly independent
CONFIDENCE_BATCHES = 20
T_95 = 1.729  # one-sided 95% Student t with CONFIDENCE_BATCHES - 1 = 19 degrees of freedom
P99_SHARE = 0.01  # a p99 within its limit: at most 1% of requests over it
SLO_KEYS = (("p99 TTFT", "ttft_p99_s", "ttft_s"), ("p99 TPOT", "tpot_p99_s", "tpot_s"),
            ("p99 end-to-end", "e2e_p99_s", "e2e_s"))


def slo_confidence(result: SimResult, slo: Slo) -> dict[str, dict[str, float]]:
    """For each latency SLO set: the share of the run's requests over its limit and a
    one-sided 95% upper bound on the share a longer run would see, from the shares of
    CONFIDENCE_BATCHES consecutive stretches (by arrival). A p99 read within its limit on
    one run can still miss it on the next when the queue swings: one H100 at 93% of its
    saturated rate read p99 TTFT 0.96 s on 25,000 requests where 400,000 read 2.05 s; its
    stretches' shares over 1 s spread widely, and the bound says so. Runs too short to
    split (fewer than CONFIDENCE_BATCHES x 100 latencies) get none."""
    lat = latencies(result)
    out = {}
    for _, field, key in SLO_KEYS:
        limit = getattr(slo, field)
        if limit is None or lat[key].size < CONFIDENCE_BATCHES * 100:
            continue
        over = lat[key] > limit  # NaN (no TPOT) is not over
        shares = np.array([part.mean() for part in np.array_split(over, CONFIDENCE_BATCHES)])
        spread = float(shares.std(ddof=1)) / math.sqrt(CONFIDENCE_BATCHES)
        out[key] = {"share_over": float(over.mean()),
                    "bound_95": float(shares.mean()) + T_95 * spread}
    return out


def stationary_stream(traffic: TrafficSpec, rate: float, *,
                      base_dir: Path | None = None) -> TrafficSpec:
    """The traffic as a stationary stream at `rate` (a diurnal curve becomes Poisson)."""
    if traffic.arrival.kind == "diurnal":
        update = {"arrival": ArrivalSpec.model_validate({"kind": "poisson",
                                                         "rate_per_s": rate})}
        if traffic.num_requests is None:  # a day-long duration: simulate a window instead
            update.update(num_requests=DIURNAL_WINDOW_REQUESTS, duration_s=None)
        return traffic.model_copy(update=update)
    return with_rate(traffic, rate, base_dir=base_dir)  # a relative trace: the scenario's


def steady_requests(load: float) -> float:
    """Requests a window needs at `load` (the arrival rate over the saturated rate) for its
    mean queue to be within QUEUE_PRECISION (module docstring); inf at or past
    saturation. A whole deployment behind its router pools its replicas' queues into one
    that serves as fast as all of them: the same count, not one per replica."""
    if not 0 <= load < 1:
        return math.inf
    z = 1.96  # two-sided 95%
    return 2 * z * z * (1 + load) / (QUEUE_PRECISION ** 2 * (1 - load) ** 2)


def settles(load: float) -> bool:
    """A window at `load` reaches its steady state within MAX_WINDOW_REQUESTS."""
    return steady_requests(load) <= MAX_WINDOW_REQUESTS


def fewest_settling(rate: float, capacity: float) -> int:
    """The fewest replicas, each completing at most `capacity` requests a second, whose
    load at `rate` is below saturation and settles."""
    r = math.floor(rate / capacity) + 1
    while not settles(rate / (r * capacity)):
        r += 1
    return r


SETTLE_WORDS = (f"loaded nearer to it, their queue would need over {MAX_WINDOW_REQUESTS:,} "
                "requests to measure")


def lengthened(traffic: TrafficSpec, requests: float, *, share_of: int = 1,
               base_dir: Path | None = None) -> TrafficSpec:
    """A stationary stream (stationary_stream's) holding at least `requests` requests (in
    one replica's share of it, `generate`'s share_of): its own count or duration when
    longer. A trace is the user's window and is kept as it is."""
    if traffic.arrival.kind in ("trace", "offline") or not math.isfinite(requests):
        return traffic
    count = traffic.num_requests
    if count is None:
        count = mean_rate_per_s(traffic, base_dir=base_dir) / share_of * traffic.duration_s
    if count >= requests:
        return traffic
    return traffic.model_copy(update={"num_requests": math.ceil(requests),
                                      "duration_s": None})


def sojourn_window_s(result: SimResult) -> float:
    """WINDOW_SOJOURNS size-biased sojourns of the run's completed requests (seconds)."""
    done = result.completed
    if not done.any():
        return 0.0
    sojourn_s = result.finish_s[done] - result.requests.arrival_s[done]
    return WINDOW_SOJOURNS * float((sojourn_s ** 2).sum() / max(sojourn_s.sum(), 1e-12))


def simulate_steady(scenario, deployment, resolved, rate: float, capacity: float | None,
                    base_dir: Path | None = None, share_of: int = 1,
                    at_least: int = 0) -> SimResult:
    """`deployment` simulated on the scenario's traffic at `rate` (with `share_of` R, one
    of R replicas' share of it), its window lengthened to the steady state: the requests
    `steady_requests` asks at its load, and WINDOW_SOJOURNS size-biased sojourns as
    measured on the last run (run again, at most twice, while it was shorter, WINDOW_SLACK
    aside: a short run's sojourns are shorter too). Without `capacity` (one replica's
    saturated rate), the scenario's window as it is. `at_least`: requests to start from (a
    run of the same deployment with a replica more or less found the window it needed)."""
    replicas = deployment.replicas
    stream = stationary_stream(scenario.traffic, rate, base_dir=base_dir)

    def run(requests: float) -> SimResult:
        traffic = lengthened(stream, min(requests, MAX_WINDOW_REQUESTS), share_of=share_of,
                             base_dir=base_dir)
        return simulate(deployment, generate(traffic, seed=scenario.seed, base_dir=base_dir,
                                             share_of=share_of), resolved=resolved)

    if not capacity:
        return run(0.0)
    queue = steady_requests(rate / (share_of * replicas * capacity))
    result = run(max(queue, at_least))
    for _ in range(2):
        need = max(queue, rate / share_of * sojourn_window_s(result))
        if len(result.requests) >= WINDOW_SLACK * min(need, MAX_WINDOW_REQUESTS) \
                or stream.arrival.kind == "trace":
            break
        result = run(need / WINDOW_SLACK)
    return result


def short_window_note(result: SimResult, utilization: float | None,
                      length: str = "num_requests") -> str | None:
    """Why a stationary run's p99 latencies may misstate the service's (low from its empty
    start, either way from few samples): its window is shorter than the
    steady state needs at `utilization` (the offered rate over the saturated one), with
    the count that reaches it. `length`: what sets the window ('num_requests',
    'duration_s' or 'trace'), for the fix. None when long enough, or past saturation (the
    queue grows: the capacity line says so)."""
    requests = result.requests
    n = len(requests)
    if utilization is None or utilization >= 1 or n < 2:  # past saturation: capacity says
        return None
    span_s = float(requests.arrival_s.max() - requests.arrival_s.min())
    if span_s <= 0:
        return None
    # below half the saturated rate an M/M/1 queue holds under one request (rho / (1 - rho)
    # < 1): its precision is no reason to lengthen a user's run
    queue = steady_requests(utilization) if utilization >= 0.5 else 0.0
    batches = n / span_s * sojourn_window_s(result)
    need = max(queue, batches)
    if n >= WINDOW_SLACK * need:
        return None
    load = f"{utilization:.0%} of the saturated rate"
    if queue > MAX_WINDOW_REQUESTS:
        return (f"at {load} the queue swings so widely that p99 latencies differ from run to "
                f"run (pinning them down takes over {MAX_WINDOW_REQUESTS:,} requests): plan "
                "for more replicas or a lower rate rather than trust these")
    count = _round_up(need / WINDOW_SLACK)
    fix = {"num_requests": f"set traffic.num_requests to about {count:,}",
           "duration_s": f"set traffic.duration_s to about {_round_up(count * span_s / n):,} s",
           "trace": f"replay a trace of about {count:,} requests"}[length]
    # the direction is derived for the start only (an empty queue, lighter batches: module
    # docstring); a p99 of n requests is their n/100-th slowest, whose draw errs either way
    # (the 70B example on 3,000 requests read p99 TTFT 292.5 ms where its steady window
    # read 280.0 ms)
    light = sojourn_window_s(result) / WINDOW_SOJOURNS / span_s  # E[S^2] / (E[S] T)
    why = ("sees few of the queue's swings, from an empty start" if queue >= batches else
           "starts with empty engines and ends draining them, its batches about "
           f"{max(light, 0.01):.0%} lighter than the service's")
    return (f"{n:,} requests are too few at {load}: a run this short {why}, so its p99 "
            "latencies may misstate the service's: the light start pulls them low, but a "
            f"p99 of {n:,} requests rests on its {max(n // 100, 1):,} slowest, which can land "
            f"either side. About {count:,} give figures that hold: {fix} (plan serve "
            "simulates its candidates that long)")


def _round_up(n: float) -> int:
    """`n` rounded up to two significant figures (12,345 -> 13,000; 678 -> 680)."""
    scale = 10 ** max(0, math.floor(math.log10(max(n, 1.0))) - 1)
    return math.ceil(n / scale) * scale
