"""Cloud offers: what one instance with `count` accelerators costs per hour, and where it was read.

The table is `catalog/data/offers.csv`, one row per (provider, instance type, region). Prices are
per instance-hour of `count` accelerators. A provider that sells GPUs by the GPU-hour in
instances of several sizes at one per-GPU rate (RunPod pods, Crusoe VMs) has one row: `count` is
the size its prices quote and `sizes` lists the GPU counts an instance can be rented with
(`1|2|4|8`; empty: `count` alone), each billed count / `count` times the row's price. An empty
price cell means the provider publishes no such price, never zero. Each
row says when the price was charged or listed (`observed`), where it was read (`source`), when we
read it (`retrieved`) and whether it is an `estimate`: not the provider's own figure as listed
(inferred, modelled, or from an untraceable write-up). A verbatim copy of the provider's list
by a catalog tool (SkyPilot, gpuhunt, dstack, a dated transcription) counts as the provider's
own. Prices move: a scenario can override them (`prices: {h100: 2.50}`).

Queries compare offers per accelerator-hour (instance price / count), so an 8-GPU node and a
1-GPU VM are comparable.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import re
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from infraplan.catalog import DATA_DIR, load_catalog
from infraplan.catalog.schema import SLUG
from infraplan.catalog.table import describe_validation
from infraplan.errors import InputError, UnknownNameError

OFFERS_CSV = DATA_DIR / "offers.csv"

PRICINGS = ("on_demand", "spot", "reserved-1y", "reserved-3y")
_PRICE_COLUMN = {"on_demand": "on_demand_usd_per_hour", "spot": "spot_usd_per_hour",
                 "reserved-1y": "reserved_1y_usd_per_hour",
                 "reserved-3y": "reserved_3y_usd_per_hour"}
COLUMNS = ("provider", "instance_type", "accelerator", "count", "sizes", "region",
           *_PRICE_COLUMN.values(), "observed", "estimate", "source", "retrieved", "notes")
OPTIONAL_COLUMNS = ("sizes",)  # an offers file written before the column still reads
_OBSERVED = re.compile(r"^\d{4}-\d{2}(-\d{2})?$")


def pricing_column(pricing: str) -> str:
    """The price column of a pricing model; 'on-demand' and 'reserved_1y' are accepted too."""
    key = pricing.strip().lower().replace("-", "_")
    for name, column in _PRICE_COLUMN.items():
        if name.replace("-", "_") == key:
            return column
    raise UnknownNameError("pricing", pricing, PRICINGS,
                           fix="use one of on_demand, spot, reserved-1y, reserved-3y")


class Offer(BaseModel):
    """One instance type at one provider (and region), with its published hourly prices."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    provider: str = Field(description="lower-case slug: aws, gcp, azure, coreweave, ...")
    instance_type: str = Field(min_length=1, description="the provider's name for the offer")
    accelerator: str = Field(description="accelerator name or alias; stored canonical")
    count: int = Field(ge=1, description="accelerators in the instance the prices quote "
                                         "(TPU: chips)")
    sizes: tuple[int, ...] = Field(default=(), description="accelerator counts an instance "
                                   "is rented with at the same per-GPU price; () = count only")
    region: str = Field(default="", description="empty when the source names none")
    on_demand_usd_per_hour: float | None = Field(default=None, ge=0)
    spot_usd_per_hour: float | None = Field(default=None, ge=0)
    reserved_1y_usd_per_hour: float | None = Field(default=None, ge=0)
    reserved_3y_usd_per_hour: float | None = Field(default=None, ge=0)
    observed: str = Field(description="when the price was charged or listed: YYYY-MM-DD or "
                                      "YYYY-MM")
    estimate: bool = Field(description="true when the figure is not the provider's own price")
    source: str = Field(min_length=3, description="where the figure was read")
    retrieved: dt.date = Field(description="when we read the source")
    notes: str = ""

    @field_validator("provider")
    @classmethod
    def _slug(cls, provider: str) -> str:
        if not SLUG.match(provider):
            raise ValueError(f"{provider!r} must be a lower-case slug like 'aws' or 'coreweave'")
        return provider

    @field_validator("sizes", mode="before")
    @classmethod
    def _sizes(cls, sizes):
        if isinstance(sizes, str):  # the CSV cell: "1|2|4|8"
            cells = [c.strip() for c in sizes.split("|")] if sizes.strip() else []
            if not all(c.isdigit() and int(c) >= 1 for c in cells):
                raise ValueError(f"{sizes!r} must be GPU counts of 1 or more separated by '|', "
                                 "like 1|2|4|8")
            sizes = [int(c) for c in cells]
        return tuple(sizes)

    @field_validator("accelerator")
    @classmethod
    def _known(cls, name: str) -> str:
        return load_catalog().accelerators.get(name).name  # UnknownNameError: did you mean

    @field_validator("observed")
    @classmethod
    def _date(cls, observed: str) -> str:
        observed = observed.strip()
        if not _OBSERVED.match(observed):
            raise ValueError(f"{observed!r} must be YYYY-MM-DD or YYYY-MM")
        dt.date.fromisoformat(observed if len(observed) == 10 else f"{observed}-01")
        return observed

    @model_validator(mode="after")
    def _priced(self) -> Offer:
        if all(self.usd_per_hour(p) is None for p in PRICINGS):
            raise ValueError("no price: give at least one of " + ", ".join(_PRICE_COLUMN.values()))
        if self.sizes and (self.count not in self.sizes or list(self.sizes) != sorted(
                set(self.sizes))):
            raise ValueError(f"sizes {'|'.join(map(str, self.sizes))} must rise, without "
                             f"repeats, and include count ({self.count}): the size the prices "
                             "quote")
        return self

    @property
    def instance_sizes(self) -> tuple[int, ...]:
        """The accelerator counts an instance of this offer can have, smallest first."""
        return self.sizes or (self.count,)

    @property
    def largest(self) -> int:
        """The most accelerators one instance of this offer holds."""
        return self.instance_sizes[-1]

    def usd_per_hour(self, pricing: str = "on_demand") -> float | None:
        """The instance price under a pricing model; None when the provider publishes none."""
        return getattr(self, pricing_column(pricing))

    def usd_per_gpu_hour(self, pricing: str = "on_demand") -> float | None:
        """What one accelerator-hour costs: the instance price over its accelerator count."""
        price = self.usd_per_hour(pricing)
        return None if price is None else price / self.count

    @property
    def on_demand_usd_per_gpu_hour(self) -> float | None:
        return self.usd_per_gpu_hour("on_demand")

    @property
    def spot_usd_per_gpu_hour(self) -> float | None:
        return self.usd_per_gpu_hour("spot")

    @property
    def reserved_1y_usd_per_gpu_hour(self) -> float | None:
        return self.usd_per_gpu_hour("reserved-1y")

    @property
    def reserved_3y_usd_per_gpu_hour(self) -> float | None:
        return self.usd_per_gpu_hour("reserved-3y")


def load_offers(path: Path | str | None = None) -> list[Offer]:
    """The offers in a CSV file (default: the shipped table, read once). A bad cell raises an
    InputError naming the file, the line and the column."""
    if path is None:
        return list(_shipped())
    return _read(Path(path))


@lru_cache(maxsize=1)
def _shipped() -> tuple[Offer, ...]:
    return tuple(_read(OFFERS_CSV))


def _read(path: Path) -> list[Offer]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot read offers file {path}: {exc.strerror}") from None
    reader = csv.DictReader(io.StringIO(text))
    header = reader.fieldnames or []
    missing = [c for c in COLUMNS if c not in header and c not in OPTIONAL_COLUMNS]
    unknown = [c for c in header if c not in COLUMNS]
    if missing or unknown:
        raise InputError(f"{path.name}: header " + "; ".join(
            part for part in (missing and f"missing {', '.join(missing)}",
                              unknown and f"unknown {', '.join(unknown)}") if part),
            fix="the header is " + ",".join(COLUMNS))
    offers, first_line = [], {}
    for row in reader:
        line = reader.line_num
        cells = {k: (v.strip() if isinstance(v, str) else v) for k, v in row.items()}
        if None in cells:
            raise InputError(f"{path.name}, line {line}: more cells than columns")
        for column in _PRICE_COLUMN.values():
            cells[column] = cells[column] or None  # empty = not published
        try:
            offer = Offer.model_validate(cells)
        except ValidationError as exc:
            raise InputError(f"{path.name}, line {line}: {describe_validation(exc)}") from None
        key = (offer.provider, offer.instance_type, offer.region)
        if key in first_line:
            raise InputError(f"{path.name}, line {line}: {key} repeats line {first_line[key]}",
                             fix="keep one row per provider, instance type and region")
        first_line[key] = line
        offers.append(offer)
    return offers


def offers_for(accelerator: str, provider: str | None = None, region: str | None = None,
               pricing: str = "on_demand", *, offers: list[Offer] | None = None) -> list[Offer]:
    """Offers of an accelerator (alias accepted) that publish a `pricing` price, cheapest per
    accelerator-hour first."""
    providers = None if provider is None else [provider]
    regions = None if region is None else [region]
    return _matching(accelerator, pricing, providers, regions, offers)


def cheapest(accelerator: str, pricing: str = "on_demand", providers: list[str] | None = None,
             regions: list[str] | None = None, *, offers: list[Offer] | None = None,
             instance_gpus: int = 1) -> Offer:
    """The offer with the lowest price per accelerator-hour among instances of at least
    `instance_gpus` accelerators (a multi-node job rents whole nodes: a one-GPU VM has no
    NVLink to its neighbours nor the node's NICs); when none is that large, the cheapest of
    any size. An InputError says what exists when nothing matches."""
    matches = _matching(accelerator, pricing, providers, regions, offers)
    if matches:
        return next((o for o in matches if o.largest >= instance_gpus), matches[0])
    gpu = load_catalog().accelerators.get(accelerator).name
    table = load_offers() if offers is None else offers
    sold = [o for o in table if o.accelerator == gpu]
    where = "".join(f" {label} {', '.join(v)}" for label, v in
                    (("from", providers), ("in", regions)) if v)
    if sold:
        found = "; ".join(f"{p}: " + ", ".join(sorted({
            f"{o.provider} {o.region}".strip() for o in sold if o.usd_per_hour(p) is not None}))
            for p in PRICINGS if any(o.usd_per_hour(p) is not None for o in sold))
    else:
        found = "no offer sells it; offers exist for " + ", ".join(sorted({o.accelerator
                                                                        for o in table}))
    raise InputError(f"no {pricing} offer for {gpu}{where} in the offers table ({found})",
                     fix=f"give a price in the scenario: prices: {{{gpu}: 2.50}}")


def price_per_gpu_hour(accelerator: str, pricing: str = "on_demand",
                       providers: list[str] | None = None, regions: list[str] | None = None,
                       *, offers: list[Offer] | None = None, instance_gpus: int = 1) -> float:
    """The lowest price of one accelerator-hour (USD) among the matching offers (of
    instances with `instance_gpus` or more, as `cheapest` picks them)."""
    return cheapest(accelerator, pricing, providers, regions, offers=offers,
                    instance_gpus=instance_gpus).usd_per_gpu_hour(pricing)


def _matching(accelerator: str, pricing: str, providers: list[str] | None,
              regions: list[str] | None, offers: list[Offer] | None) -> list[Offer]:
    pricing_column(pricing)  # a typo in `pricing` fails here, before any look-up
    gpu = load_catalog().accelerators.get(accelerator).name
    table = load_offers() if offers is None else offers
    if providers is not None:
        known = {o.provider for o in table}
        for name in providers:
            if name not in known:
                raise UnknownNameError("provider", name, known)
    hits = [o for o in table if o.accelerator == gpu and o.usd_per_hour(pricing) is not None
            and (providers is None or o.provider in providers)
            and (regions is None or o.region in regions)]
    return sorted(hits, key=lambda o: (o.usd_per_gpu_hour(pricing), o.provider,
                                       o.instance_type, o.region))
