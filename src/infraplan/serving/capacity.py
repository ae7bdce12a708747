"""What one replica can do on a stream's lengths, measured by simulation: its capacity
(requests a second, saturated) and its latency floor (each request alone on it)."""

from __future__ import annotations

import math

import numpy as np

from infraplan.serving.deployment import ResolvedReplica
from infraplan.serving.metrics import summarize
from infraplan.serving.simulate import simulate
from infraplan.serving.traffic import Requests
from infraplan.units import three_figures

# The saturated run holds this many engine batches of requests, so that most completions
# happen while a queue still waits (a full batch) rather than while the last batch drains.
SATURATION_BATCHES = 4
SATURATION_SAMPLE = 4096  # requests of the stream whose lengths the saturated run takes


def saturated_requests_per_s(resolved: ResolvedReplica, requests: Requests) -> float:
    """The most requests a second one replica completes on the stream's lengths.

    The lengths (at least SATURATION_BATCHES batches of max_num_seqs, repeated if the
    stream is shorter; at most SATURATION_SAMPLE of them) all arrive at t = 0. The rate
    counts the completions from the first one to the moment the last request starts (its
    first token): the engine runs full the whole time, past the start-up of the first batch
    and before the last batch drains. A queue is stable only below this rate (utilisation
    < 1, e.g. Kleinrock, Queueing Systems I, Sec. 2.1), whatever the SLOs."""
    engines = resolved.deployment.pp  # a pipeline runs pp engines (simulate.py)
    n = max(SATURATION_BATCHES * resolved.max_num_seqs * engines,
            min(len(requests), SATURATION_SAMPLE))
    batch = Requests(np.zeros(n), np.resize(requests.input_tokens, n),
                     np.resize(requests.output_tokens, n))
    res = simulate(resolved.deployment.model_copy(update={"replicas": 1}), batch,
                   resolved=resolved)
    finish = np.sort(res.finish_s[res.completed])
    if finish.size == 0:
        return 0.0
    last_start = float(np.nanmax(res.first_token_s))
    steady = int(np.count_nonzero((finish > finish[0]) & (finish <= last_start)))
    if steady == 0:  # one batch held every request: its whole run is the measure
        return finish.size / float(finish[-1])
    return steady / (last_start - float(finish[0]))


MAX_GAP_WIDENINGS = 8  # 4^8: from a 1 s gap to 18 hours between requests
PROBE_SPACING_S = 1e6  # apart enough that the probes run alone (11.6 days)


def idle_latency(resolved: ResolvedReplica, requests: Requests) -> dict:
    """Latency summary of the stream's requests (up to SATURATION_SAMPLE of them), each
    alone on one replica: arrivals are spaced further apart than a request with the longest
    prompt and the longest output takes alone. Load only adds work to the steps a request
    shares (a step's time grows with what it holds), so each request's latency here is a
    floor; the per-replica streams the planner simulates draw the same lengths (arrival
    draws do not depend on the rate), so their percentiles cannot beat these."""
    n = min(len(requests), SATURATION_SAMPLE)
    inputs, outputs = requests.input_tokens[:n], requests.output_tokens[:n]
    dep = resolved.deployment.model_copy(update={"replicas": 1})
    # Probes, each alone: the longest prompt with the longest output (a bound on every
    # request's time alone) and, for when that pair does not fit the cache, the stream's
    # requests ranked 1, 2, 3, 5, 9, ... down to the median by prompt, by output and by
    # their sum (the pair was dropped, the gap fell to 1 s, and repeated runs of the queued
    # stream widened it: 17 of 83 idle checks of a 288-configuration search, 60 s of 200 s).
    ranks = n - 1 - (2 ** np.arange(int(np.log2(max(n // 2, 1))) + 1) - 1)
    picks = np.unique(np.concatenate([np.argsort(x, kind="stable")[ranks] for x in (
        inputs, outputs, inputs + outputs)]))
    probe_in = np.concatenate([inputs.max(keepdims=True), inputs[picks]])
    probe_out = np.concatenate([outputs.max(keepdims=True), outputs[picks]])
    starts = np.arange(probe_in.size) * PROBE_SPACING_S
    probes = simulate(dep, Requests(starts, probe_in, probe_out), resolved=resolved)
    took = probes.finish_s - starts
    longest_s = took[0] if np.isfinite(took[0]) else np.nanmax(took, initial=0.0)
    gap_s = 2.0 * float(longest_s) + 1.0
    # A request longer alone than the probes (possible only when the pair did not fit)
    # overlaps the next: widen the gap until each request finished before the next arrived.
    for _ in range(MAX_GAP_WIDENINGS):
        arrivals = np.arange(n) * gap_s
        alone = simulate(dep, Requests(arrivals, inputs, outputs), resolved=resolved)
        if not (alone.finish_s[alone.completed] - arrivals[alone.completed] >= gap_s).any():
            break
        gap_s *= 4.0
    return summarize(alone)


def stream_rate_per_s(requests: Requests) -> float | None:
    """The rate a run was offered: its requests after the first over the span of their
    arrivals ((n - 1) / span, the gaps' mean inverted); None when they all arrive at once
    (an offline batch) or there are fewer than two."""
    n = len(requests)
    span_s = float(requests.arrival_s.max() - requests.arrival_s.min()) if n else 0.0
    return (n - 1) / span_s if n > 1 and span_s > 0 else None


# How capacity_summary names a planning rate (offered_load's `what`) and, when that rate
# is not the one simulated, the run's own rate
PLANNED = {"offered": "offered", "peak": "the planned peak (peak_rate_per_s)",
           "curve peak": "the diurnal curve's peak"}
SIMULATED = {"peak": "the simulated stream's arrivals come at",
             "curve peak": "the simulated hours' arrivals come at"}


def _part(share: float) -> str:
    return f"{share:.0%}" if share >= 0.005 else "under 1%"


def _load_clause(head: str, rate: float, taken: float, capacity: float,
                 link: str = " is") -> str:
    """'<head> R requests/s is S% of it', or with refusals: what it takes of R, apart."""
    share = rate * taken / capacity
    grows = "" if share < 1 else ", more than it completes: the queue grows"
    if taken >= 1:
        return f"{head} {three_figures(rate)} requests/s{link} {_part(share)} of it{grows}"
    return (f"{head} {three_figures(rate)} requests/s; it takes {taken:.1%} of them "
            f"({three_figures(rate * taken)} requests/s) and refuses the rest; what it "
            f"takes is {_part(share)} of the saturated rate{grows}")


def capacity_summary(resolved: ResolvedReplica, requests: Requests, replicas: int,
                     offered_per_s: float, what: str = "offered",
                     per_replica_s: float | None = None, accepted_share: float = 1.0,
                     simulated_per_s: float | None = None) -> dict:
    """The most requests a second the deployment completes on the stream's lengths (each
    replica's saturated rate times the replicas: a router keeps every one busy while a
    queue waits), and the share of it the traffic asks for (utilisation; none for an
    offline batch, which has no rate). `what` names `offered_per_s` (offered_load's:
    'offered' for the stream's own mean, 'peak' for peak_rate_per_s, 'curve peak' for a
    diurnal curve's top). `per_replica_s`: the saturated rate when the caller measured it
    already (the planner, for its candidates). `accepted_share`: the share of the requests
    the engine takes (the run's completed over completed and refused): the refused ones
    leave at once, so only the rest load it.

    A planned peak is not what a run of the scenario's own traffic was offered:
    `simulated_per_s` (default: the rate of `requests`' arrivals, stream_rate_per_s) gives
    that run's load ('simulated_utilization'), which judges its window (window.py), and the
    text states both. With 'offered' the two are one."""
    if per_replica_s is None:
        per_replica_s = saturated_requests_per_s(resolved, requests)
    capacity = replicas * per_replica_s
    rated = math.isfinite(offered_per_s) and capacity > 0
    share = offered_per_s * accepted_share / capacity if rated else None
    if what == "offered":
        simulated_per_s = offered_per_s
    elif simulated_per_s is None:
        simulated_per_s = stream_rate_per_s(requests)
    sim_share = (simulated_per_s * accepted_share / capacity
                 if rated and simulated_per_s is not None else None)
    text = f"{three_figures(capacity)} requests/s when saturated"
    one_rate = what == "offered" or sim_share is None or math.isclose(
        simulated_per_s, offered_per_s)  # a run at the planning rate (the report's plan)
    if share is not None and one_rate:
        text += "; " + _load_clause(PLANNED[what], offered_per_s, accepted_share, capacity)
    elif share is not None:  # the run's own load first, then the planned peak's
        text += "; " + _load_clause(SIMULATED[what], simulated_per_s, accepted_share, capacity,
                                     ",")
        peak = f"{PLANNED[what]} of {three_figures(offered_per_s)} requests/s"
        text += (f"; {peak} would be {_part(share)} of it" if accepted_share >= 1 else
                 f"; at {peak} it would take {three_figures(offered_per_s * accepted_share)} "
                 f"requests/s, {_part(share)} of the saturated rate")
        text += "" if share < 1 else ", more than it completes: the queue would grow"
    return {"requests_per_s": capacity, "offered_requests_per_s": offered_per_s if rated
            else None, "utilization": share,
            "simulated_requests_per_s": simulated_per_s if rated else None,
            "simulated_utilization": sim_share, "text": text}


def accepted_share(summary: dict) -> float:
    """The share of a run's requests its engines took (not refused as too long)."""
    return summary["completed"] / max(summary["completed"] + summary["dropped"], 1)
