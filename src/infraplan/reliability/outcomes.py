"""What a Monte-Carlo training run reports (montecarlo.py draws it): per-trial samples,
their percentiles and mean, the scan of checkpoint intervals, one strategy's distribution."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from infraplan.reprs import compact_repr


@dataclass(frozen=True)
class Stat:
    """Percentiles over the trials (numpy's linear interpolation) and the mean. The bad
    tail is p90 of wall time, cost and interruptions, p10 of goodput."""

    p10: float
    p50: float
    p90: float
    mean: float

    @classmethod
    def of(cls, values: np.ndarray) -> Stat:
        p10, p50, p90 = np.percentile(values, [10, 50, 90])
        return cls(float(p10), float(p50), float(p90), float(np.mean(values)))


@dataclass(frozen=True, eq=False)
class Samples:
    """Per-trial outcomes (arrays of length `trials`)."""

    wall_s: np.ndarray
    cost_usd: np.ndarray
    failures: np.ndarray
    preemptions: np.ndarray

    __repr__ = compact_repr


@dataclass(frozen=True, eq=False)
class IntervalScan:
    """Mean wall time and goodput against the checkpoint interval (same seed at each)."""

    intervals_s: np.ndarray
    mean_wall_s: np.ndarray
    mean_goodput: np.ndarray
    best_interval_s: float
    daly_interval_s: float  # Daly's own (inf when no interruption loses work)
    upload_s: float  # the upload time w: no interval scanned is shorter (0: synchronous)

    __repr__ = compact_repr


@dataclass(frozen=True, eq=False)
class RunDistribution:
    """One strategy over `trials` trials: each quantity's Stat."""

    strategy: str
    trials: int
    seed: int
    interval_s: float
    interval_source: str  # "given", "daly", "upload" (Daly's raised to w) or "scan"
    daly_interval_s: float  # Daly's own for the work-losing rate (inf when none loses work)
    wall_s: Stat
    goodput: Stat  # work_s / wall_s: the effective training time ratio
    cost_usd: Stat
    interruptions: Stat  # failures + preemptions
    preemptions: Stat
    samples: Samples
    scan: IntervalScan | None = None


@dataclass(frozen=True)
class Commitment:
    """What reserving the reserved GPUs commits to, beside the strategy's cost over the run:
        committed_usd = reserved_gpus x usd_per_gpu_hour x years x 8,766.72 h
    and, per trial, the strategy's cost counting the whole term instead of the hours used:
        with_term_usd = cost_usd - reserved_gpus x usd_per_gpu_hour x min(wall, term)
                        + committed_usd
    (the run's own reserved hours are part of the term; a run longer than the term bills
    its excess at the reserved price). with_term_usd is what the strategy costs unless the
    reserved GPUs do other paid work for the rest of the term."""

    reserved_gpus: int
    years: int
    usd_per_gpu_hour: float
    committed_usd: float
    with_term_usd: Stat

    def to_json(self) -> dict:
        s = self.with_term_usd
        return {"reserved_gpus": self.reserved_gpus, "term_years": self.years,
                "usd_per_gpu_hour": self.usd_per_gpu_hour, "committed_usd": self.committed_usd,
                "cost_with_term_usd": {"p50": s.p50, "p90": s.p90, "mean": s.mean}}
