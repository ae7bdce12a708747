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
