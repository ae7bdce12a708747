"""Plan-search throughput: GPT-3 175B, seq 2048, global batch 1536, A100-80GB, 8 to 1024 GPUs.

Builds the full plan space (every GPU count that is a multiple of 8 up to 1024 x TP x PP x
CP x ZeRO x micro-batch x recompute x sequence parallel x TP overlap x virtual stages),
prunes what cannot run, evaluates memory and step time for every remaining plan, and ranks
them. Prints the candidate count, the configurations evaluated, the wall time, and as its
last line the configurations evaluated per second (target: >= 100,000 on 2 cores).
"""

from __future__ import annotations

import time

from infraplan.models import load_model
from infraplan.training.evaluate import TrainingJob
from infraplan.training.search import search
from infraplan.training.space import Knobs


def main() -> None:
    arch = load_model("gpt3-175b")
    job = TrainingJob(seq_len=2048, global_batch=1536, precision="bf16", tokens=300e9)
    knobs = Knobs(gpus=tuple(range(8, 1025, 8)))
    search(arch, ["a100-sxm4-80gb"], Knobs(gpus=(64,)), job)  # warm caches and imports
    start = time.perf_counter()
    result = search(arch, ["a100-sxm4-80gb"], knobs, job)
    elapsed = time.perf_counter() - start
    best = result.best[0]
    print(f"candidate configurations (before pruning): {result.candidates:,}")
    print(f"configurations evaluated (memory + step time): {result.configs_evaluated:,}")
    print(f"fitting in memory: {result.fitting:,}")
    print(f"best: {best.plan.num_gpus} GPUs {best.plan.describe()}, step {best.step_s:.2f} s, "
          f"MFU {best.mfu:.1%}")
    print(f"search wall time: {elapsed:.2f} s")
    print(f"configs evaluated per second: {result.configs_evaluated / elapsed:,.0f}")


if __name__ == "__main__":
    main()
