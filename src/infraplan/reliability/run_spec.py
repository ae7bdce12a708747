"""`run:` in a training scenario: how `simulate train` draws the run (checkpoint storage,
pricing strategies, spot capacity, a reserved baseline, trials).

Restart after a failure = detection + checkpoint read. Detection defaults to 600 s: a hung
collective is found when PyTorch's NCCL process-group timeout fires, 10 minutes by default
(torch.distributed.init_process_group).
"""

from __future__ import annotations

import math
import re
from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from infraplan.catalog import load_catalog
from infraplan.economics.cost import UsdPerGpuHour
from infraplan.economics.instances import Footprint, rent
from infraplan.economics.offers import offers_for
from infraplan.errors import InputError, UnknownNameError
from infraplan.spec_checks import StrictNumbers
from infraplan.units import format_usd_rate
from infraplan.reliability.failures import FailureModel, from_rate, llama3_failure_model
from infraplan.reliability.montecarlo import MAX_TRIALS, STRATEGIES
from infraplan.reliability.spot import (
    AWS_ADVISOR_BANDS,
    DEFAULT_DISCOUNT,
    SpotModel,
    advisor_band_of,
    default_rate_basis,
    provider_notice,
    rate_from_monthly_fraction,
)

FIGURE = re.compile(r"\d+(\.\d*)?\s*%?")  # '12%', '12.5 %', '12': a figure, not a band
FAILURE_DETECTION_S = 600.0  # PyTorch's default NCCL process-group timeout (10 min)


class _Spec(StrictNumbers):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SpotSpec(_Spec):
    """Spot capacity; defaults from reliability/spot.py: the notice of the spot offer's
    provider, AWS's H100 advisor band for the preemption rate."""

    usd_per_gpu_hour: UsdPerGpuHour | None = Field(
        default=None, description="default: on-demand x (1 - discount); see price()")
    # None, not DEFAULT_DISCOUNT: whether it was given picks the pricing rule (price()),
    # and a scenario written back by model_dump() must price the same
    discount: float | None = Field(default=None, ge=0, lt=1,
                                   description="fraction off the on-demand price (default: "
                                               "see price())")
    monthly_interrupted_fraction: float | None = Field(default=None, ge=0, lt=1)
    advisor_band: Literal["<5%", "5-10%", "10-15%", "15-20%", ">20%"] | None = None
    notice_s: float | None = Field(
        default=None, ge=0, description="warning before a spot node goes (default: the "
        "provider's of the catalog's cheapest spot offer for the job, catalog/data/"
        "reliability.yaml: AWS 120 s, GCP 30 s, Azure 30 s; AWS's for others)")
    capacity_wait_mean_s: float = Field(default=3600.0, ge=0)
    restart_s: float = Field(default=600.0, ge=0)

    def price(self, gpu: str, on_demand_usd_per_gpu_hour: float, *,
              scenario_priced: bool, footprint: Footprint | None = None) -> tuple[float, str]:
        """(spot USD per GPU-hour, where it came from), first rule that applies:
        1. run.spot.usd_per_gpu_hour;
        2. a discount given in run.spot, off the scenario's on-demand price;
        3. the scenario prices the GPU (prices:): that price x (1 - d), d the discount of the
           catalog's cheapest spot offer off the same provider's on-demand price (the
           default discount when the catalog has no such pair);
        4. the catalog's cheapest spot offer (its on-demand price is the catalog's too).
        Offers are billed in whole instances as `footprint` fills them (instances.rent).
        A price at or above on-demand is refused: spot would never pay."""
        od = on_demand_usd_per_gpu_hour
        if self.usd_per_gpu_hour is not None:
            price, source = self.usd_per_gpu_hour, "run.spot.usd_per_gpu_hour"
        elif self.discount is not None:
            price, source = od * (1 - self.discount), \
                f"on-demand ${format_usd_rate(od)} less run.spot.discount " \
                f"{self.discount * 100:g}%"
        else:
            rental, own = _spot_offer(gpu, footprint or Footprint())
            offer = rental and rental.offer
            if scenario_priced:
                if own is None:
                    discount, origin = DEFAULT_DISCOUNT, "the default discount (the catalog " \
                        f"has no spot offer with an on-demand price for {gpu})"
                else:
                    discount = 1 - offer.spot_usd_per_gpu_hour / own
                    origin = f"the discount of the catalog's cheapest spot offer " \
                             f"({offer.provider}, ${format_usd_rate(offer.spot_usd_per_gpu_hour)}" \
                             f") off its on-demand ${format_usd_rate(own)}"
                price, source = od * (1 - discount), \
                    f"the scenario's on-demand ${format_usd_rate(od)} less {discount:.1%}, " \
                    f"{origin}"
            elif offer is None:
                price, source = od * (1 - DEFAULT_DISCOUNT), \
                    f"on-demand less the default discount {DEFAULT_DISCOUNT:.0%} (no spot offer)"
            else:
                price, source = rental.usd_per_gpu_hour, \
                    f"the catalog's {rental.basis()}"
        if not price < od:
            raise InputError(f"run.spot: the spot price ${format_usd_rate(price)} per GPU-hour "
                             f"({source}) is not below on-demand ${format_usd_rate(od)}",
                             fix="give run.spot.usd_per_gpu_hour or run.spot.discount below "
                                 "on-demand, or drop spot from run.strategies")
        return price, source

    @field_validator("monthly_interrupted_fraction", mode="before")
    @classmethod
    def _a_fraction_not_a_percentage(cls, value: Any) -> Any:
        """15 meant as 15% read 'must be < 1 (got 15)': say it is a fraction, and give
        the fraction (a percentage of 100 or more is every instance, or more)."""
        if isinstance(value, (int, float)) and not isinstance(value, bool) and \
                1 < value <= 100:
            raise InputError(f"is a fraction of the instances interrupted in a month, not a "
                             f"percentage (got {value:g})",
                             fix=f"write {value / 100:.4g} for {value:g}% (a fraction below 1)"
                             if value < 100 else "write a fraction below 1: 0.15 for 15%")
        return value

    @field_validator("advisor_band", mode="before")
    @classmethod
    def _a_band_not_a_figure(cls, value: Any) -> Any:
        """'50%' is a figure, not one of the bands: name the band that holds it, and the
        field that takes a figure (a bare number >= 1 is read as percent, below 1 as a
        fraction)."""
        text = value.strip() if isinstance(value, str) else None
        if text is not None and FIGURE.fullmatch(text):
            percent = float(text.rstrip("%").strip())
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and \
                0 <= value < math.inf:
            percent = value if value >= 1 else value * 100
        else:
            return value
        bands = ", ".join(repr(band) for band in AWS_ADVISOR_BANDS)
        band = f"write advisor_band: '{advisor_band_of(percent)}'"
        raise InputError(f"must be one of the Spot Instance Advisor's bands ({bands}), "
                         "not a single figure",
                         fix=f"{band} (the band that holds {percent:g}%), or, for the figure "
                             f"itself, monthly_interrupted_fraction: {percent / 100:.4g}"
                         if percent < 100 else f"{band} ({percent:g}% is more than every "
                                               "instance: a monthly share is at most 100%)")

    @model_validator(mode="after")
    def _one_preemption_rate(self) -> SpotSpec:
        if self.advisor_band is not None and self.monthly_interrupted_fraction is not None:
            raise ValueError("has both advisor_band and monthly_interrupted_fraction: give one")
        return self

    def model(self, spot_usd_per_gpu_hour: float, provider: str | None = None) -> SpotModel:
        """The spot capacity at a price (from price()) rented from `provider` (its notice
        is the default: spot.provider_notice)."""
        fraction = AWS_ADVISOR_BANDS[self.advisor_band] if self.advisor_band else \
            self.monthly_interrupted_fraction
        extra = {} if fraction is None else {
            "preemption_rate_per_node_s": rate_from_monthly_fraction(fraction)}
        notice = provider_notice(provider)[0] if self.notice_s is None else self.notice_s
        return SpotModel(spot_usd_per_gpu_hour=spot_usd_per_gpu_hour,  # overrides a discount
                         notice_s=notice, capacity_wait_mean_s=self.capacity_wait_mean_s,
                         restart_s=self.restart_s, **extra)

    def basis(self, provider: str | None) -> dict[str, str]:
        """Whose figures model() takes for the notice and the preemption rate."""
        notice = "run.spot.notice_s" if self.notice_s is not None else \
            provider_notice(provider)[1]
        rate = f"run.spot.advisor_band {self.advisor_band!r} (its midpoint)" \
            if self.advisor_band else "run.spot.monthly_interrupted_fraction" \
            if self.monthly_interrupted_fraction is not None else default_rate_basis(provider)
        return {"notice": notice, "preemption_rate": rate}


def spot_provider(gpu: str, footprint: Footprint) -> str | None:
    """The provider of the catalog's cheapest spot rental of the job's instances (whose
    notice is the default), or None when the catalog has no spot offer for the GPU."""
    rental, _ = _spot_offer(gpu, footprint)
    return rental.offer.provider if rental else None


def _spot_offer(gpu: str, footprint: Footprint):
    """(the spot rental whose whole instances cost least, or None; the on-demand USD per
    GPU-hour of the same provider: the offer's own, else the provider's cheapest for the
    GPU, else None)."""
    try:
        rental = rent(gpu, "spot", footprint)
    except InputError:
        return None, None
    offer = rental.offer
    own = offer.on_demand_usd_per_gpu_hour
    if own is None:
        same = offers_for(gpu, offer.provider, pricing="on_demand")
        own = same[0].on_demand_usd_per_gpu_hour if same else None
    return rental, own


class ReservedSpec(_Spec):
    gpus: int = Field(ge=1, description="GPUs reserved for the whole run (the baseline)")
    usd_per_gpu_hour: UsdPerGpuHour | None = Field(
        default=None, description="default: the catalog's cheapest 1-year reserved offer")


# The checkpoint tier when neither run.checkpoint_storage nor training.storage names one
# (or training.storage is the nodes' local NVMe). Not the node's local NVMe: a checkpoint
# must outlive the node failures it protects against, and a copy on the failed node's own
# disk goes with it.
DEFAULT_CHECKPOINT_TIER = "fsx-lustre-p2-1000"


class RunSpec(_Spec):
    """`run:` in a training scenario: what `simulate train` draws."""

    checkpoint_storage: str | None = Field(
        default=None, description="storage tier the checkpoints go to (default: "
                                  "training.storage unless it is local NVMe, else "
                                  f"{DEFAULT_CHECKPOINT_TIER})")
    asynchronous: bool = Field(default=True, description="async checkpoint (host copy, then "
                                                         "upload while training)")
    failure_detection_s: float = Field(default=FAILURE_DETECTION_S, ge=0)
    failures_per_gpu_hour: float | None = Field(
        default=None, gt=0, allow_inf_nan=False,
        description="unexpected interruptions per GPU-hour, your fleet's own (a job on N "
                    "GPUs is interrupted N times as often); default: the Llama 3 405B run's, "
                    "419 in 54 days on 16,384 H100s = 1.97e-5 (reliability/failures.py)")
    strategies: tuple[Literal["on_demand", "spot", "reserved_plus_spot"], ...] = Field(
        default=STRATEGIES[:2], min_length=1, description="pricing strategies to compare "
        "(default: on_demand and spot, plus reserved_plus_spot when run.reserved is given)")
    spot: SpotSpec = SpotSpec()
    reserved: ReservedSpec | None = None
    trials: int = Field(default=1000, ge=1, le=MAX_TRIALS)
    seed: int = Field(default=0, ge=0)
    optimise_interval: bool = Field(default=True, description="scan intervals around Daly's")

    def failure_model(self) -> FailureModel:
        """The interruption rate per GPU: run.failures_per_gpu_hour, else Llama 3 405B's."""
        if self.failures_per_gpu_hour is None:
            return llama3_failure_model()
        return from_rate(self.failures_per_gpu_hour, name="run.failures_per_gpu_hour")

    @model_validator(mode="before")
    @classmethod
    def _default_strategies(cls, data: Any) -> Any:
        if isinstance(data, dict) and "strategies" not in data:
            with_reserved = data.get("reserved") is not None
            return {**data, "strategies": STRATEGIES if with_reserved else STRATEGIES[:2]}
        return data

    @field_validator("strategies")
    @classmethod
    def _each_strategy_once(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"lists {', '.join(map(repr, twice))} more than once")
        return names

    @field_validator("checkpoint_storage")
    @classmethod
    def _known_tier(cls, name: str | None) -> str | None:
        if name is None:
            return name
        storage = load_catalog().storage
        try:
            tier = storage.get(name)
        except UnknownNameError as exc:
            raise ValueError("is not a storage tier in the catalog; " + (
                f"did you mean {', '.join(map(repr, exc.close))}?" if exc.close else
                "'infraplan catalog storage' lists them")) from None
        if tier.node_local:  # see DEFAULT_CHECKPOINT_TIER
            shared = ", ".join(t.name for t in storage
                               if not t.node_local and t.name != DEFAULT_CHECKPOINT_TIER)
            raise InputError(
                f"{name!r} is a node's own disk (kind: {tier.kind} in the storage catalog), "
                "so a checkpoint there is not durable: it goes with the node whose failure "
                "it should survive, and a spot preemption takes back every node of the job",
                fix=f"write checkpoints to a shared tier: remove run.checkpoint_storage for "
                    f"the default, {DEFAULT_CHECKPOINT_TIER}, or name one of {shared}")
        return name
