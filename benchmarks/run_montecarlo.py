"""Training-run Monte-Carlo speed: 10,000 trials of a 54-day (failure-free compute) run of
Llama 3.1 405B on 16,384 H100s, the Llama 3 interruption rate (about 470 interruptions a
trial), under each strategy: on-demand, spot (the default SpotModel: 15% of nodes a month,
2-minute notice, 1 h mean wait) and 8,192 reserved GPUs plus 8,192 spot.

Checkpoints: asynchronous to FSx for Lustre (catalog plan: blocking copy, then the upload);
restart: reading it back plus 10 minutes to reschedule and re-initialise (an estimate).
Prices (USD per GPU-hour): on-demand 3.90 (Crusoe's H100 list price), spot 60% off it (the
SpotModel default), reserved 2.50 (an estimate). Prints a line per strategy and, last, the
trials per second of the slowest strategy.

    python benchmarks/run_montecarlo.py [--trials N]
"""

from __future__ import annotations

import argparse
import time

from infraplan.catalog import load_catalog
from infraplan.models import load_model, param_counts
from infraplan.reliability.checkpoint import plan_checkpoints, transfer_time_s
from infraplan.reliability.failures import llama3_failure_model
from infraplan.reliability.montecarlo import TrainingRun, simulate_run
from infraplan.reliability.spot import SpotModel

DAY_S = 86400.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10_000)
    args = parser.parse_args()
    gpus, nodes = 16_384, 2_048
    failures = llama3_failure_model()
    tier = load_catalog().storage.get("fsx-lustre-p2-1000")
    params = param_counts(load_model("llama-3.1-405b")).total
    plan = plan_checkpoints(params, tier, nodes=nodes, num_gpus=gpus,
                            mtbf_s=failures.job_mtbf_s(gpus))
    restart_s = transfer_time_s(plan.size_bytes, tier, nodes, write=False) + 600.0
    run = TrainingRun.from_checkpoint_plan(
        plan, asynchronous=True, work_s=54 * DAY_S, num_gpus=gpus, restart_s=restart_s,
        on_demand_usd_per_gpu_hour=3.90, failures=failures)
    spot = SpotModel()
    simulate_run(run, trials=10, seed=0)  # warm imports
    rates = {}
    for strategy in ("on_demand", "spot", "reserved_plus_spot"):
        start = time.perf_counter()
        result = simulate_run(run, strategy, spot=spot, reserved_gpus=gpus // 2,
                              reserved_usd_per_gpu_hour=2.50, trials=args.trials, seed=1)
        elapsed = time.perf_counter() - start
        rates[strategy] = args.trials / elapsed
        print(f"{strategy:>18}: wall p50 {result.wall_s.p50 / DAY_S:6.1f} d, p90 "
              f"{result.wall_s.p90 / DAY_S:6.1f} d; mean goodput {result.goodput.mean:.3f}, "
              f"cost ${result.cost_usd.mean / 1e6:6.1f}M, interruptions "
              f"{result.interruptions.mean:6.0f}; interval {result.interval_s:.0f} s; "
              f"{elapsed:.2f} s")
    slowest = min(rates, key=rates.get)
    print(f"trials per second ({args.trials:,} trials, slowest strategy: {slowest}): "
          f"{rates[slowest]:,.0f}")


if __name__ == "__main__":
    main()
