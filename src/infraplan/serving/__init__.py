"""Serving: how long an engine step takes, an event simulator of continuous batching, and a
capacity planner that finds the cheapest deployment meeting latency SLOs.

    from infraplan.serving import Deployment, TrafficSpec, generate, simulate, summarize
    traffic = TrafficSpec.model_validate({"arrival": {"kind": "poisson", "rate_per_s": 10},
                                          "num_requests": 2000,
                                          "input": {"kind": "lognormal", "mean": 1000},
                                          "output": {"kind": "lognormal", "mean": 200}})
    result = simulate(Deployment(model="llama-3.1-8b", gpu="h100"), generate(traffic, seed=0))
    summarize(result)["ttft_s"]["p99"]
"""

from infraplan.serving.deployment import Deployment, resolve
from infraplan.serving.metrics import Slo, summarize
from infraplan.serving.simulate import SimResult, simulate
from infraplan.serving.traffic import Requests, TrafficSpec, generate

__all__ = ["Deployment", "Requests", "SimResult", "Slo", "TrafficSpec", "generate", "resolve",
           "simulate", "summarize"]
