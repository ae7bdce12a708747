"""The cost of a plan as separate line items: compute, storage, egress, networking, monitoring.

A scenario's `costs:` section becomes a `CostInputs`; `plan_cost` turns GPU-hours, a price per
GPU-hour and the run's duration into a `CostBreakdown` whose items each say how they were
computed. Units: storage and egress are in GB = 1e9 bytes, as providers bill them (a field
given as "500 GiB" is converted once, here: 500 x 2**30 / 1e9 = 536.87 GB); money in USD.

Monthly prices are pro-rated by duration with a month of 30.44 days (365.25 / 12 = 30.4375,
rounded): months = duration_s / 2,630,016 s. Providers meter storage in GB-hours and divide by
the hours of the calendar month; a fixed average month keeps a plan independent of the
calendar (a 28-day February would be billed about 9% more per day, a 31-day month 2% less).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BeforeValidator, ConfigDict, Field, ValidationError

from infraplan.catalog import load_catalog
from infraplan.errors import InputError
from infraplan.spec_checks import StrictNumbers, describe_errors
from infraplan.units import GIGA, format_figure, format_usd_rate, parse_quantity

DAYS_PER_MONTH = 30.44
SECONDS_PER_DAY = 86_400.0
SECONDS_PER_HOUR = 3_600.0
SECONDS_PER_MONTH = DAYS_PER_MONTH * SECONDS_PER_DAY  # 2,630,016 s
HOURS_PER_MONTH = SECONDS_PER_MONTH / SECONDS_PER_HOUR  # 730.56 h

# Internet egress: AWS S3 "Data Transfer OUT From Amazon S3 To Internet", first 10 TB / month,
# $0.09 per GB (us-east-1; EC2 bills the same tier). Source: aws.amazon.com/s3/pricing as quoted
# in several public cost write-ups, read 2026-11-22. The 100 GB/month free allowance per
# account and the cheaper tiers above 10 TB/month (0.085, 0.07, 0.05) are ignored: an upper
# bound for small volumes, about 6-80% high for very large ones.
DEFAULT_EGRESS_USD_PER_GB = 0.09
DEFAULT_STORAGE_TIER = "s3-standard"


def _gigabytes(value: Any) -> Any:
    """A size in GB (1e9 bytes): a bare number is GB; "2 TiB", "500GB", "1.5e12 B" convert."""
    if isinstance(value, str):
        try:
            return float(value.replace("_", "").replace(",", ""))
        except ValueError:
            pass
        try:
            return parse_quantity(value, "bytes", field="size") / GIGA
        except InputError as exc:  # pydantic adds the field name; keep the rest of the text
            raise ValueError(str(exc).removeprefix("size: ")) from None
    return value


GB = Annotated[float, BeforeValidator(_gigabytes), Field(ge=0, allow_inf_nan=False)]
Usd = Annotated[float, Field(ge=0, allow_inf_nan=False)]
# A GPU-hour price: above 0 and at most ten times the dearest 8-GPU instance-hour in the
# offers table ($98.32, an H100 VM): past that it is a typo (a run of extra zeros, 1e300)
# that would print a 300-digit cost.
MAX_USD_PER_GPU_HOUR = 1000.0
UsdPerGpuHour = Annotated[float, Field(gt=0, le=MAX_USD_PER_GPU_HOUR, allow_inf_nan=False)]


class CostInputs(StrictNumbers):
    """A scenario's `costs:` section. Every amount is >= 0; unknown keys are refused.

    Build one from a dict with `CostInputs.from_dict(raw)`: problems come back as one
    InputError naming each field (and a close match for a typo). `CostInputs(...)` raises
    pydantic's ValidationError as usual.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    dataset_gb: GB = Field(default=0.0, description="training / serving data kept in storage")
    dataset_tier: str = Field(default=DEFAULT_STORAGE_TIER,
                              description="storage tier name from catalog/data/storage.yaml")
    dataset_usd_per_gb_month: Usd | None = Field(
        default=None, description="price override; default: the tier's price_usd_per_gb_month")
    checkpoint_gb: GB = Field(default=0.0, description="size of ONE checkpoint")
    checkpoints_kept: int = Field(default=1, ge=0, description="checkpoints retained at once")
    checkpoint_tier: str = Field(default=DEFAULT_STORAGE_TIER)
    checkpoint_usd_per_gb_month: Usd | None = None
    retention_days: float = Field(default=0.0, ge=0, allow_inf_nan=False,
                                  description="days storage is kept after the run ends")
    egress_gb: GB = Field(default=0.0, description="data sent out to the internet")
    egress_usd_per_gb: Usd = DEFAULT_EGRESS_USD_PER_GB
    networking_usd_per_month: Usd = Field(default=0.0, description="e.g. NAT, load balancer")
    networking_usd_per_hour: Usd = 0.0
    monitoring_usd_per_month: Usd = Field(default=0.0, description="e.g. metrics, logs, APM")
    monitoring_usd_per_hour: Usd = 0.0

    @classmethod
    def from_dict(cls, raw: dict[str, Any] | None, origin: str = "costs") -> CostInputs:
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            raise InputError(f"{origin}: expected a mapping of cost fields, got {raw!r}")
        try:
            inputs = cls.model_validate(raw)
        except ValidationError as exc:
            raise InputError(f"{origin}: {describe_errors(exc, cls)}") from None
        for which in ("dataset", "checkpoint"):
            storage_usd_per_gb_month(inputs, which, origin=origin)  # tier names and prices
        return inputs


def storage_usd_per_gb_month(inputs: CostInputs, which: str, *, origin: str = "costs") -> float:
    """The $/GB-month for `which` ('dataset' or 'checkpoint'): the override, else the tier's
    catalog price. An unknown tier gets did-you-mean; a tier without a price (disks bundled
    with a node, an on-prem appliance) asks for an explicit price."""
    override = getattr(inputs, f"{which}_usd_per_gb_month")
    tier_name = getattr(inputs, f"{which}_tier")
    try:
        tier = load_catalog().storage.get(tier_name)
    except InputError as exc:
        raise InputError(f"{origin}.{which}_tier: {exc.message}",
                         fix="run 'infraplan catalog storage' to list the tiers") from None
    if override is not None:
        return override
    if tier.price_usd_per_gb_month is None:
        raise InputError(
            f"{origin}.{which}_tier: storage tier {tier.name!r} has no price_usd_per_gb_month "
            f"(bundled with a node or bought outright)",
            fix=f"set {origin}.{which}_usd_per_gb_month (0 if it is already paid for)")
    return tier.price_usd_per_gb_month


@dataclass(frozen=True)
class LineItem:
    name: str
    usd: float
    formula: str  # how it was computed, with the numbers used


@dataclass(frozen=True)
class CostBreakdown:
    items: tuple[LineItem, ...]
    duration_s: float

    @property
    def total_usd(self) -> float:
        return math.fsum(item.usd for item in self.items)

    def item(self, name: str) -> LineItem:
        for item in self.items:
            if item.name == name:
                return item
        raise KeyError(f"no line item {name!r}; items: {[i.name for i in self.items]}")

    def to_dict(self) -> dict[str, Any]:
        return {"items": [{"name": i.name, "usd": i.usd, "formula": i.formula}
                          for i in self.items],
                "total_usd": self.total_usd, "duration_s": self.duration_s}


# each kind of line a scenario's costs: can add beyond compute, with the keys that add it
BILLABLE_KINDS = (("storage", ("dataset_gb", "checkpoint_gb")), ("egress", ("egress_gb",)),
                  ("networking", ("networking_usd_per_month", "networking_usd_per_hour")),
                  ("monitoring", ("monitoring_usd_per_month", "monitoring_usd_per_hour")))


def unbilled_note(inputs: CostInputs, *, checkpoints: bool = True) -> str:
    """The kinds of cost the scenario's `costs:` leaves out, with the key that bills each
    (its first), or "" when every kind has a line. `checkpoints`: whether the workload
    writes them (training), so that checkpoint_gb is the key to name for storage."""
    missing = []
    for kind, keys in BILLABLE_KINDS:
        if not any(getattr(inputs, key) for key in keys):
            named = keys[:2 if kind == "storage" and checkpoints else 1]
            missing.append(f"{kind} (" + ", ".join(f"costs.{k}" for k in named) + ")")
    if not missing:
        return ""
    listed = ", ".join(missing[:-1]) + " and " + missing[-1] if len(missing) > 1 else missing[0]
    keys = "those keys to add them" if len(missing) > 1 else "that key to add it"
    return f"not billed: {listed}; set {keys}"


def _check_amount(name: str, value: float) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool) \
            or not math.isfinite(value) or value < 0:
        raise InputError(f"{name} must be a finite number >= 0 (got {value!r})")
    return float(value)


def plan_cost(gpu_hours: float, usd_per_gpu_hour: float, duration_s: float,
              inputs: CostInputs | dict[str, Any] | None = None, *,
              compute_label: str = "compute", price_basis: str = "",
              billed_per_used: float = 1.0) -> CostBreakdown:
    """Line items of a plan's cost; `total_usd` is their sum.

    compute    = gpu_hours x usd_per_gpu_hour
                 (whole instances, `billed_per_used` GPUs billed per GPU used: the line shows
                 the GPU-hours billed at the instance's own rate, the same amount)
    dataset    = dataset_gb x $/GB-month x months_stored
    checkpoints= checkpoints_kept x checkpoint_gb x $/GB-month x months_stored
                 (the whole retained set is billed from the start: an upper bound while the
                 first checkpoints are still being written)
    egress     = egress_gb x egress_usd_per_gb
    networking = usd_per_month x months_run + usd_per_hour x hours_run (monitoring alike)
    months_run = duration_s / (30.44 x 86,400 s); months_stored adds retention_days / 30.44.
    Items that come to exactly $0 (nothing asked for) are left out, compute always stays;
    its basis names `price_basis` (where the price came from) when given.
    """
    gpu_hours = _check_amount("gpu_hours", gpu_hours)
    usd_per_gpu_hour = _check_amount("usd_per_gpu_hour", usd_per_gpu_hour)
    duration_s = _check_amount("duration_s", duration_s)
    if not isinstance(inputs, CostInputs):
        inputs = CostInputs.from_dict(inputs)
    months_run = duration_s / SECONDS_PER_MONTH
    hours_run = duration_s / SECONDS_PER_HOUR
    months_stored = (duration_s + inputs.retention_days * SECONDS_PER_DAY) / SECONDS_PER_MONTH
    stored = f"{months_stored:.4g} months (30.44-day)"

    hours = f"{format_figure(gpu_hours)} GPU-h"
    rate = usd_per_gpu_hour
    if billed_per_used > 1:
        hours = f"{format_figure(gpu_hours * billed_per_used)} GPU-h billed ({hours} used)"
        rate = usd_per_gpu_hour / billed_per_used
    items = [LineItem(compute_label, gpu_hours * usd_per_gpu_hour,
                      f"{hours} x ${format_usd_rate(rate)}/GPU-h"
                      + (f" ({price_basis})" if price_basis else ""))]
    if inputs.dataset_gb:
        price = storage_usd_per_gb_month(inputs, "dataset")
        items.append(LineItem(
            "storage: dataset", inputs.dataset_gb * price * months_stored,
            f"{inputs.dataset_gb:,.6g} GB x ${format_usd_rate(price)}/GB-month "
            f"({inputs.dataset_tier}) x {stored}"))
    if inputs.checkpoint_gb and inputs.checkpoints_kept:
        price = storage_usd_per_gb_month(inputs, "checkpoint")
        held_gb = inputs.checkpoints_kept * inputs.checkpoint_gb
        items.append(LineItem(
            "storage: checkpoints", held_gb * price * months_stored,
            f"{inputs.checkpoints_kept} x {inputs.checkpoint_gb:,.6g} GB x "
            f"${format_usd_rate(price)}/GB-month "
            f"({inputs.checkpoint_tier}) x {stored}"))
    if inputs.egress_gb:
        items.append(LineItem(
            "egress", inputs.egress_gb * inputs.egress_usd_per_gb,
            f"{inputs.egress_gb:,.6g} GB x ${format_usd_rate(inputs.egress_usd_per_gb)}/GB"))
    for name in ("networking", "monitoring"):
        per_month = getattr(inputs, f"{name}_usd_per_month")
        per_hour = getattr(inputs, f"{name}_usd_per_hour")
        terms = [f"${format_usd_rate(per_month)}/month x {months_run:.4g} "
                 f"month{'' if months_run == 1 else 's'}" if per_month else "",
                 f"${format_usd_rate(per_hour)}/h x {hours_run:,.6g} h" if per_hour else ""]
        if per_month or per_hour:
            items.append(LineItem(name, per_month * months_run + per_hour * hours_run,
                                  " + ".join(filter(None, terms))))
    return CostBreakdown(items=tuple(items), duration_s=duration_s)
