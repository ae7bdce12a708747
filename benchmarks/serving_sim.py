"""Serving simulator speed: 1,000,000 requests, Llama-3.1-8B on one H100 (vLLM defaults),
Poisson arrivals at 80% of the replica's capacity, lognormal lengths (mean 1,000 in / 200
out). Capacity is measured first with an offline run of 10,000 requests of the same
lengths. Prints the request count and, last, simulated requests per wall-clock second.

    python benchmarks/serving_sim.py [--requests N]
"""

from __future__ import annotations

import argparse
import resource
import time

from infraplan.serving.deployment import Deployment
from infraplan.serving.metrics import summarize
from infraplan.serving.simulate import simulate
from infraplan.serving.traffic import TrafficSpec, generate


def traffic(kind: str, n: int, rate: float | None = None) -> TrafficSpec:
    arrival = {"kind": kind} if rate is None else {"kind": kind, "rate_per_s": rate}
    return TrafficSpec.model_validate({
        "arrival": arrival, "num_requests": n,
        "input": {"kind": "lognormal", "mean": 1000, "sigma": 1.0, "max": 32000},
        "output": {"kind": "lognormal", "mean": 200, "sigma": 1.0, "max": 8000}})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1_000_000)
    args = parser.parse_args()
    start = time.perf_counter()
    dep = Deployment(model="llama-3.1-8b", gpu="h100-sxm5-80gb", engine="vllm")
    offline = simulate(dep, generate(traffic("offline", 10_000), seed=1))
    capacity = summarize(offline)["throughput"]["requests_per_s"]
    requests = generate(traffic("poisson", args.requests, 0.8 * capacity), seed=2)
    t0 = time.perf_counter()
    result = simulate(dep, requests)
    sim_s = time.perf_counter() - t0
    s = summarize(result)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"capacity (offline): {capacity:.2f} req/s; offered: {0.8 * capacity:.2f} req/s")
    print(f"completed {s['completed']:,} of {s['requests']:,}; p99 TTFT "
          f"{s['ttft_s']['p99']:.3f} s, p99 TPOT {s['tpot_s']['p99'] * 1e3:.1f} ms, "
          f"{s['steps']:,} engine steps")
    print(f"whole process {time.perf_counter() - start:.1f} s wall, peak RSS {peak_mb:.0f} MB")
    print(f"requests: {len(requests)}")
    print(f"simulated requests per second: {len(requests) / sim_s:,.0f}")


if __name__ == "__main__":
    main()
