"""Spot capacity: its price, how often it is taken back, the notice, the wait to get it back.

Sources (retrieved 2026-11-22):

- Notice, by provider: data, catalog/data/reliability.yaml (spot-notice-<provider>, each
  with its source): AWS two minutes (EC2 User Guide, "Spot Instance interruption notices"),
  GCP 30 s (Compute Engine "Spot VMs", preemption process), Azure 30 s (Scheduled Events,
  "Preempt"). provider_notice() reads it for the provider of the spot offer a run rents.
- Preemption rate. AWS Spot Instance Advisor (aws.amazon.com/ec2/spot/instance-advisor/):
  "Frequency of interruption represents the rate at which Spot has reclaimed capacity during
  the trailing month", in bands of <5%, 5-10%, 10-15%, 15-20% and >20% (the wording of its
  data feed, spot-advisor-data.json). AWS publishes bands, not rates; a third-party snapshot of
  the Advisor put H100 (p5) instances in the 10-20% bands (Thunder Compute, "GPU Spot Instance
  Interruption Rates", May 2025; 15-20% in Feb 2026). GCP publishes no rate; Azure shows
  eviction-rate bands per size and region in its portal, none sourced here for GPUs. So every
  provider gets AWS's figure (DEFAULT_MONTHLY_FRACTION), and the output says so.
- Discount. GCP: Spot VMs "at a discount of up to 91%" (60-91% in older versions of the page,
  "Create and use Spot VMs"). H100 spot list prices: CoreWeave $19.71 vs $49.24 on-demand
  for 8 GPUs, 60% off (coreweave.com/pricing, read 2026-09-20); Nebius preemptible $10.00 vs
  $23.60, 58% off (SkyPilot's copy of the Nebius price list, 2025-08).

Estimates (marked ESTIMATE below) are ours where no public figure exists.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from infraplan.catalog import load_catalog
from infraplan.errors import UnknownNameError
from infraplan.checks import check_number

AWS_NOTICE_S = 120.0  # SpotModel's default: EC2 User Guide, two minutes (spot-notice-aws)
MONTH_S = 30 * 86400.0  # the Advisor's "trailing month", taken as 30 days

# Spot Instance Advisor bands -> a representative monthly interrupted fraction: the band's
# midpoint; ">20%" has no upper edge, 25% is an ESTIMATE.
AWS_ADVISOR_BANDS = {"<5%": 0.025, "5-10%": 0.075, "10-15%": 0.125, "15-20%": 0.175,
                     ">20%": 0.25}


def advisor_band_of(percent: float) -> str:
    """The Spot Instance Advisor band that holds a monthly interruption figure in percent,
    read from the bands' own labels ('<5%', '5-10%', '>20%'); a bound opens the band above."""
    for band in AWS_ADVISOR_BANDS:
        label = band.rstrip("%")
        if label.startswith("<"):
            low, high = 0.0, float(label[1:])
        elif label.startswith(">"):
            low, high = float(label[1:]), math.inf
        else:
            low, high = (float(x) for x in label.split("-"))
        if low <= percent < high:
            return band
    raise ValueError(f"no band holds {percent}%")


def rate_from_monthly_fraction(fraction: float) -> float:
    """Preemptions per node-second from the fraction of instances interrupted in a month.

    An instance preempted as a Poisson process of rate r survives a month with probability
    exp(-r T), so a fraction f = 1 - exp(-r T) is interrupted: r = -ln(1 - f) / T. Reading
    the Advisor's "rate at which Spot has reclaimed capacity" as that fraction is our
    interpretation (AWS does not define it further)."""
    check_number("monthly interrupted fraction", fraction, ge=0, lt=1)
    return -math.log1p(-fraction) / MONTH_S


# ESTIMATE: the low end of GCP's 60-91%; H100 spot list prices are 58-60% off.
DEFAULT_DISCOUNT = 0.6

# ESTIMATE: H100 (p5) sat in the 10-20% bands (third-party snapshot above): 15% a month is
# 2.26e-4 per node-hour, one preemption every 184 days per node, every 2.2 h for 2,048 nodes.
DEFAULT_MONTHLY_FRACTION = 0.15


def provider_notice(provider: str | None) -> tuple[float, str]:
    """(seconds of warning before a spot instance of `provider` goes, whose figure it is):
    the catalog's spot-notice-<provider> row, else AWS's two minutes."""
    rows = load_catalog().reliability
    if provider is not None and f"spot-notice-{provider}" in rows:
        return rows.get(f"spot-notice-{provider}").value, f"{provider}'s"
    return rows.get("spot-notice-aws").value, \
        f"AWS's (the catalog has no spot notice for {provider})" if provider else "AWS's"


def default_rate_basis(provider: str | None) -> str:
    """Whose figure the default preemption rate is, for spot capacity of `provider`."""
    other = "" if provider == "aws" else \
        f"; the catalog has none for {provider}" if provider else ""
    return (f"AWS's figure, an ESTIMATE from the Spot Instance Advisor's 10-20% bands for H100 "
            f"(p5) instances{other}")


@dataclass(frozen=True)
class SpotModel:
    """Spot (preemptible) capacity for a training job; every field is validated."""

    discount: float = DEFAULT_DISCOUNT
    """Fraction off the on-demand price. Ignored when `spot_usd_per_gpu_hour` is given."""
    spot_usd_per_gpu_hour: float | None = None
    """An explicit spot price; overrides `discount`."""
    preemption_rate_per_node_s: float = rate_from_monthly_fraction(DEFAULT_MONTHLY_FRACTION)
    """Preemptions per instance (node) per second; a job on K nodes is stopped at K times
    this rate, since losing any node stops a synchronous job."""
    notice_s: float = AWS_NOTICE_S
    """Warning before the instance goes away (AWS 120 s, GCP 30 s)."""
    capacity_wait_mean_s: float = 3600.0
    """Mean wait, exponentially distributed, until the capacity can be had again (ESTIMATE:
    no provider publishes it; SkyPilot-style recovery retries zones for minutes to hours)."""
    restart_s: float = 600.0
    """Provisioning, start-up and checkpoint reload once capacity is back (ESTIMATE)."""

    def __post_init__(self) -> None:
        check_number("SpotModel.discount", self.discount, ge=0, lt=1,
                     fix="give the fraction off on-demand, e.g. 0.6 for 60% off")
        if self.spot_usd_per_gpu_hour is not None:
            check_number("SpotModel.spot_usd_per_gpu_hour", self.spot_usd_per_gpu_hour, ge=0)
        for name in ("preemption_rate_per_node_s", "notice_s", "capacity_wait_mean_s",
                     "restart_s"):
            check_number(f"SpotModel.{name}", getattr(self, name), ge=0)

    @classmethod
    def from_aws_band(cls, band: str, **fields) -> SpotModel:
        """A model whose preemption rate is the midpoint of a Spot Instance Advisor band."""
        if band not in AWS_ADVISOR_BANDS:
            raise UnknownNameError("Spot Instance Advisor band", band, AWS_ADVISOR_BANDS)
        return cls(preemption_rate_per_node_s=rate_from_monthly_fraction(
            AWS_ADVISOR_BANDS[band]), **fields)

    def price_usd_per_gpu_hour(self, on_demand_usd_per_gpu_hour: float) -> float:
        if self.spot_usd_per_gpu_hour is not None:
            return self.spot_usd_per_gpu_hour
        return (1.0 - self.discount) * on_demand_usd_per_gpu_hour

    def job_preemption_rate_per_s(self, nodes: int) -> float:
        """Superposition of independent per-node processes: K nodes, K times the rate."""
        check_number("nodes", nodes, ge=0, integer=True)
        return nodes * self.preemption_rate_per_node_s
