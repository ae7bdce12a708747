"""What a serving run achieved: latencies, throughput, goodput under SLOs, KV use, cost.

Definitions (as vLLM's benchmark_serving and NVIDIA GenAI-Perf use them):
- TTFT: first token time - arrival (queueing included).
- TPOT: (finish - first token) / (output tokens - 1), per request; requests of one token
  have none. Inter-token latency averaged per request, as those tools report it.
- End-to-end latency: finish - arrival.
- Throughput: completed requests and tokens over the makespan (first arrival to last
  finish).
- Goodput (Zhong et al. 2024, DistServe): requests per second that met every SLO; SLO
  attainment, their share of all requests. A request the engine refused (too long for the
  context or the KV cache) met none: it never got a token.
- Cost per million output tokens: the GPUs' price per second / the output tokens per second
  served while requests arrive (to the last arrival, after a warm-up; `steady_rates`);
  offline runs, whose requests all arrive at once, over the makespan.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

import numpy as np

from infraplan.errors import InputError
from infraplan.serving.request_book import REFUSED_BUDGET, REFUSED_CONTEXT, REFUSED_KV
from infraplan.serving.simulate import SimResult

PERCENTILES = (50, 90, 99)


@dataclass(frozen=True)
class Slo:
    ttft_p99_s: float | None = None
    tpot_p99_s: float | None = None
    e2e_p99_s: float | None = None

    def __post_init__(self):
        for name, value in self.given().items():
            _check_positive(f"slo.{name}", value, "seconds")

    def given(self) -> dict[str, float]:
        """The limits set, by name; an empty dict: no SLO, every completion counts."""
        return {k: v for k, v in (("ttft_p99_s", self.ttft_p99_s),
                                  ("tpot_p99_s", self.tpot_p99_s),
                                  ("e2e_p99_s", self.e2e_p99_s)) if v is not None}


def _check_positive(name: str, value, unit: str) -> None:
    """An InputError unless `value` is a finite number > 0 (the YAML and web forms check
    the same; a call from Python skips them)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) \
            or not math.isfinite(value) or value <= 0:
        raise InputError(f"{name} must be a finite number of {unit} > 0, got {value!r}")


def _stats(values: np.ndarray) -> dict[str, float]:
    if values.size == 0:
        return {"mean": float("nan"), **{f"p{p}": float("nan") for p in PERCENTILES}}
    pct = np.percentile(values, PERCENTILES)
    return {"mean": float(values.mean()), **{f"p{p}": float(v) for p, v in
                                            zip(PERCENTILES, pct, strict=True)}}


def latencies(res: SimResult) -> dict[str, np.ndarray]:
    done = res.completed
    arrival = res.requests.arrival_s[done]
    first, finish = res.first_token_s[done], res.finish_s[done]
    out = res.requests.output_tokens[done]
    multi = out > 1
    return {"ttft_s": first - arrival, "e2e_s": finish - arrival,
            "tpot_s": (finish[multi] - first[multi]) / (out[multi] - 1), "multi": multi}


def steady_rates(res: SimResult) -> dict[str, float] | None:
    """Tokens per second served while requests arrive: what a service that keeps running
    at this traffic delivers. The makespan adds the drain after the last arrival, when the
    engines finish a shrinking batch; a long-output tail drains for minutes, and a price
    per token over it charges a continuous service for an idle tail it does not have.

    The window runs to the last arrival, from the first arrival plus a warm-up of one p90
    end-to-end latency (the batch fills over about a request's lifetime; load tests discard
    their warm-up the same way), or from the first arrival when that would leave less than
    half the window. A request's output counts up to the window's edge: its first token at
    the first-token time, the rest evenly until it finishes (decode steps are
    near-constant); its prompt counts when its first token is out. None when the window
    serves less than half the run's output: requests that arrive in a burst (offline, all
    at t = 0) or a queue that outgrows the arrivals (overload), where the makespan is the
    run's measure."""
    req, done = res.requests, res.completed
    start, end = float(req.arrival_s.min()), float(req.arrival_s.max())
    if end <= start or not done.any():
        return None
    first, finish = res.first_token_s[done], res.finish_s[done]
    out = req.output_tokens[done].astype(float)
    prompt = req.input_tokens[done].astype(float)
    warmup = float(np.percentile(finish - req.arrival_s[done], 90))
    if warmup > (end - start) / 2:
        warmup = 0.0

    def served_by(t: float) -> tuple[float, float]:
        started = first <= t
        decode = np.clip((t - first) / np.maximum(finish - first, 1e-12), 0.0, 1.0)
        return float((started * (1.0 + (out - 1.0) * decode)).sum()), \
            float(prompt[started].sum())

    (out0, in0), (out1, in1) = served_by(start + warmup), served_by(end)
    if out1 - out0 < 0.5 * out.sum():
        return None
    window = end - start - warmup
    return {"window_s": window, "warmup_s": warmup,
            "output_tokens_per_s": (out1 - out0) / window,
            "total_tokens_per_s": (out1 - out0 + in1 - in0) / window}


def summarize(res: SimResult, *, slo: Slo | None = None,
              usd_per_gpu_hour: float | None = None) -> dict:
    if usd_per_gpu_hour is not None:
        _check_positive("usd_per_gpu_hour", usd_per_gpu_hour, "USD")
    lat = latencies(res)
    done = res.completed
    req = res.requests
    n_done = int(done.sum())
    start = float(req.arrival_s.min())
    end = float(np.nanmax(res.finish_s)) if n_done else start
    makespan = max(end - start, 1e-12)
    out_tokens = float(req.output_tokens[done].sum())
    in_tokens = float(req.input_tokens[done].sum())
    met = np.ones(n_done, dtype=bool)
    if slo is not None:
        if slo.ttft_p99_s is not None:
            met &= lat["ttft_s"] <= slo.ttft_p99_s
        if slo.tpot_p99_s is not None:
            tpot_ok = np.ones(n_done, dtype=bool)
            tpot_ok[lat["multi"]] = lat["tpot_s"] <= slo.tpot_p99_s
            met &= tpot_ok
        if slo.e2e_p99_s is not None:
            met &= lat["e2e_s"] <= slo.e2e_p99_s
    mem = res.replica.memory
    engines = len(res.busy_s)  # pp per replica with pipeline stages
    capacity = res.engine_kv_blocks * engines
    gpus = res.deployment.num_gpus
    summary = {
        "requests": len(req), "completed": n_done, "dropped": len(res.dropped),
        "dropped_by_reason": dict(Counter(res.dropped.values()).most_common()),
        "preemptions": int(res.preemptions.sum()),
        "makespan_s": makespan,
        "ttft_s": _stats(lat["ttft_s"]), "tpot_s": _stats(lat["tpot_s"]),
        "e2e_s": _stats(lat["e2e_s"]),
        "throughput": {"requests_per_s": n_done / makespan,
                       "output_tokens_per_s": out_tokens / makespan,
                       "total_tokens_per_s": (in_tokens + out_tokens) / makespan},
        "goodput_requests_per_s": float(met.sum()) / makespan,
        # over every request, the refused ones included; without an SLO, goodput is
        # throughput and attainment the completed share: the views say "no SLO"
        "slo_attainment": float(met.sum()) / len(req),
        "slo": {} if slo is None else slo.given(),
        "kv_cache": {"capacity_tokens": mem.kv_tokens, "block_size": mem.block_size,
                     "mean_utilization": float(res.block_seconds.sum() / (capacity * makespan)),
                     "peak_utilization": float(res.peak_blocks.max() / res.engine_kv_blocks)},
        # an engine's step keeps one of its replica's pp stages busy at a time
        "gpu_busy_fraction": float(res.busy_s.sum() / (engines * makespan)),
        "steps": engine_steps(res), "num_gpus": gpus,
        "simulated_requests_per_wall_s": len(req) / max(res.wall_s, 1e-9),
    }
    if res.timeline["t_s"].size:
        # time averages over the run (the integral of each queue's length), per replica:
        # a replica with pipeline stages has one queue per stage's engine
        summary["queue"] = {
            "mean_waiting": float(res.waiting_seconds.sum()
                                  / (res.deployment.replicas * makespan)),
            "max_waiting": int(res.peak_waiting.max())}
    steady = steady_rates(res)
    if steady is not None:
        summary["steady"] = steady
    if usd_per_gpu_hour is not None:
        usd_per_s = gpus * usd_per_gpu_hour / 3600.0
        rates = steady or {"output_tokens_per_s": out_tokens / makespan,
                           "total_tokens_per_s": (in_tokens + out_tokens) / makespan}
        summary["cost"] = {
            "usd_per_gpu_hour": usd_per_gpu_hour, "usd": usd_per_s * makespan,
            **{f"usd_per_million_{kind}_tokens": usd_per_s / rates[f"{kind}_tokens_per_s"]
               * 1e6 if rates[f"{kind}_tokens_per_s"] > 0 else float("inf")
               for kind in ("output", "total")}}
    return summary


def output_rate(summary: dict) -> tuple[float, str]:
    """(output tokens per second, its basis): while requests arrive (steady_rates, what the
    cost is priced at), else over the whole run."""
    if "steady" in summary:
        return summary["steady"]["output_tokens_per_s"], "while requests arrive"
    return summary["throughput"]["output_tokens_per_s"], "over the run"


def engine_steps(res: SimResult) -> int:
    """The engines' iterations. Under speculative decoding the simulator steps one
    generated token at a time, at the iteration's time over the tokens it yields
    (step_time.Speculation): its decode iterations are those steps over tokens_per_step."""
    spec = res.replica.step.speculation
    if spec is None:
        return res.steps
    return round(res.steps - res.decode_steps + res.decode_steps / spec.tokens_per_step)


def dropped_reasons(summary: dict) -> str:
    """'200 prompt + output longer than the KV cache holds; ...': the refused requests by
    reason."""
    return "; ".join(f"{n:,} {why}" for why, n in summary["dropped_by_reason"].items())


# the fix of each refusal (engine.submit), keyed by the start of its reason
REFUSAL_FIXES = {
    REFUSED_CONTEXT.split("{")[0]: "keep prompt + output within the model's context: "
                                   "shorten the requests (traffic.input / traffic.output)",
    REFUSED_KV: "shorten the requests (traffic.input / traffic.output), or give the engine "
                "more KV cache (raise deployment.tp, or quantize deployment.weight_dtype or "
                "kv_dtype)",
    REFUSED_BUDGET: "set deployment.chunked_prefill: true, or raise "
                    "deployment.max_num_batched_tokens above the longest prompt",
}


def _refusal_fixes(summary: dict) -> str | None:
    """The fixes of the reasons requests were refused, in their order."""
    fixes = [fix for why in summary["dropped_by_reason"]
             for start, fix in REFUSAL_FIXES.items() if why.startswith(start)]
    return "; or ".join(dict.fromkeys(fixes)) or None


def dropped_warning(summary: dict, mean_request_tokens: float) -> str | None:
    """The warning a run that dropped most of its requests leads with (None when most
    completed): its latencies and throughput describe the few that completed. Requests
    refused by the KV cache compare the cache with the mean request (prompt + output)."""
    dropped, total = summary["dropped"], summary["requests"]
    if 2 * dropped <= total:
        return None
    text = (f"{dropped:,} of {total:,} requests ({dropped / total:.0%}) were dropped, so the "
            f"figures describe the {summary['completed']:,} that completed: "
            f"{dropped_reasons(summary)}")
    if REFUSED_KV in summary["dropped_by_reason"]:
        text += (f" ({summary['kv_cache']['capacity_tokens']:,} tokens a replica; the mean "
                 f"request, prompt + output, needs {mean_request_tokens:,.0f})")
    fix = _refusal_fixes(summary)
    return text + (f"; to fix: {fix}" if fix else "")


def require_completions(summary: dict) -> None:
    """An InputError when no request completed: every one was refused (too long for the
    context, the KV cache or an unchunked prefill), so there is nothing to report. The fix
    answers the reasons given, in their order."""
    if summary["completed"] == 0:
        raise InputError(f"no request completed: {dropped_reasons(summary)}",
                         fix=_refusal_fixes(summary))
