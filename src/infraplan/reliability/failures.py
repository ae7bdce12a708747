"""Interruption rates of large jobs, derived from a published run.

Failures of independent components superpose: a job on N accelerators, each interrupted as
a Poisson process of rate r, is interrupted at rate N r, so its mean time between
interruptions is 1 / (N r). That is the rate "growing with the number of accelerators"
(Google's ML goodput post: the cost of a failure grows with the cluster's size).

The per-accelerator rate comes from the Llama 3 405B run (catalog/data/reliability.yaml):
419 unexpected interruptions in 54 days on 16,384 H100 GPUs is
r = 419 / (54 x 24 h x 16,384) = 1.97e-5 per GPU-hour (one every 50,700 GPU-hours; a job
of 16,384 GPUs was interrupted every 3.1 hours). Every cause is counted against the GPUs
(78% were confirmed hardware, the rest software, network and host issues that a job of
that shape also meets).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from infraplan.catalog import load_catalog
from infraplan.checks import check_number
from infraplan.units import three_figures

HOUR_S = 3600.0
DAY_S = 86400.0


@dataclass(frozen=True)
class FailureModel:
    """Unexpected interruptions per accelerator-second; `derivation` says where it came
    from."""

    rate_per_gpu_s: float
    derivation: str

    def __post_init__(self) -> None:
        check_number("FailureModel.rate_per_gpu_s", self.rate_per_gpu_s, ge=0)

    def job_mtbf_s(self, num_gpus: int) -> float:
        """Mean time between interruptions of a job spanning `num_gpus` accelerators
        (infinite for a model without failures)."""
        check_number("num_gpus", num_gpus, ge=1, integer=True)
        rate = self.rate_per_gpu_s * num_gpus
        return math.inf if rate == 0 else 1.0 / rate

    def expected_interruptions(self, num_gpus: int, duration_s: float) -> float:
        check_number("num_gpus", num_gpus, ge=1, integer=True)
        check_number("duration_s", duration_s, ge=0)
        return self.rate_per_gpu_s * num_gpus * duration_s


def from_run(interruptions: float, days: float, gpus: int, *, name: str) -> FailureModel:
    """Rate per accelerator from a published run: interruptions / (days x GPUs). A run
    that saw no interruption gives no rate (FailureModel(0.0, ...) is a failure-free model)."""
    check_number("interruptions", interruptions, gt=0,
                 fix="a rate needs at least one observed interruption")
    check_number("days", days, gt=0)
    check_number("gpus", gpus, ge=1, integer=True)
    rate = interruptions / (days * DAY_S * gpus)
    return FailureModel(rate, f"{name}: {interruptions:g} interruptions / ({days:g} days x "
                              f"{gpus:,} GPUs) = {rate * HOUR_S:.3g} per GPU-hour")


def from_rate(per_gpu_hour: float, *, name: str) -> FailureModel:
    """A fleet's own rate, in interruptions per GPU-hour (a team's incident log: its
    interruptions over the GPU-hours its jobs ran)."""
    check_number(name, per_gpu_hour, gt=0, fix="give interruptions per GPU-hour, e.g. 2e-5")
    every = three_figures(1 / per_gpu_hour)  # 0.5, not '0' (':,.0f' printed 0 at 2/GPU-h)
    return FailureModel(per_gpu_hour / HOUR_S, f"{name}: {per_gpu_hour:.3g} per GPU-hour "
                                               f"(one every {every} GPU-hours)")


def llama3_failure_model() -> FailureModel:
    """The default: the Llama 3 405B pre-training run's unexpected interruptions."""
    figures = load_catalog().reliability
    return from_run(figures.get("llama3-405b-unexpected-interruptions").value,
                    figures.get("llama3-405b-snapshot-days").value,
                    int(figures.get("llama3-405b-gpus").value), name="Llama 3 405B")
