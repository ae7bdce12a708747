"""`run:` in a training scenario: how `simulate train` draws the run (checkpoint storage,
pricing strategies, spot capacity, a reserved baseline, trials).

Restart after a failure = detection + checkpoint read. Detection defaults to 600 s: a hung
collective is found when PyTorch's NCCL process-group timeout fires, 10 minutes by default
(torch.distributed.init_process_group).
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from infraplan.economics.offers import price_per_gpu_hour as offer_price
from infraplan.errors import InputError
from infraplan.spec_checks import StrictNumbers
from infraplan.reliability.montecarlo import STRATEGIES
from infraplan.reliability.spot import AWS_ADVISOR_BANDS, SpotModel, rate_from_monthly_fraction

MAX_TRIALS = 100_000
FAILURE_DETECTION_S = 600.0  # PyTorch's default NCCL process-group timeout (10 min)


class _Spec(StrictNumbers):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SpotSpec(_Spec):
    """Spot capacity; defaults from reliability/spot.py (AWS notice, H100 advisor band)."""

    usd_per_gpu_hour: float | None = Field(
        default=None, gt=0, description="default: the catalog's cheapest spot offer, else "
                                        "on-demand x (1 - discount)")
    discount: float = Field(default=0.6, ge=0, lt=1)
    monthly_interrupted_fraction: float | None = Field(default=None, ge=0, lt=1)
    advisor_band: Literal["<5%", "5-10%", "10-15%", "15-20%", ">20%"] | None = None
    notice_s: float = Field(default=120.0, ge=0)
    capacity_wait_mean_s: float = Field(default=3600.0, ge=0)
    restart_s: float = Field(default=600.0, ge=0)

    def model(self, gpu: str) -> SpotModel:
        if self.advisor_band is not None and self.monthly_interrupted_fraction is not None:
            raise InputError("run.spot: give advisor_band or monthly_interrupted_fraction, "
                             "not both")
        fraction = AWS_ADVISOR_BANDS[self.advisor_band] if self.advisor_band else \
            self.monthly_interrupted_fraction
        price = self.usd_per_gpu_hour
        if price is None:
            try:
                price = offer_price(gpu, "spot")
            except InputError:
                price = None  # no listed spot offer: the discount applies
        extra = {} if fraction is None else {
            "preemption_rate_per_node_s": rate_from_monthly_fraction(fraction)}
        return SpotModel(discount=self.discount, spot_usd_per_gpu_hour=price,
                         notice_s=self.notice_s, capacity_wait_mean_s=self.capacity_wait_mean_s,
                         restart_s=self.restart_s, **extra)


class ReservedSpec(_Spec):
    gpus: int = Field(ge=1, description="GPUs reserved for the whole run (the baseline)")
    usd_per_gpu_hour: float | None = Field(default=None, gt=0, description="default: the "
                                           "catalog's cheapest 1-year reserved offer")


class RunSpec(_Spec):
    """`run:` in a training scenario: what `simulate train` draws."""

    checkpoint_storage: str = Field(default="fsx-lustre-p2-1000",
                                    description="storage tier the checkpoints go to")
    asynchronous: bool = Field(default=True, description="async checkpoint (host copy, then "
                                                         "upload while training)")
    failure_detection_s: float = Field(default=FAILURE_DETECTION_S, ge=0)
    strategies: tuple[Literal["on_demand", "spot", "reserved_plus_spot"], ...] = Field(
        default=STRATEGIES, min_length=1, description="pricing strategies to compare")
    spot: SpotSpec = SpotSpec()
    reserved: ReservedSpec | None = None
    trials: int = Field(default=1000, ge=1, le=MAX_TRIALS)
    seed: int = Field(default=0, ge=0)
    optimise_interval: bool = Field(default=True, description="scan intervals around Daly's")
