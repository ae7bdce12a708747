"""What a scenario says about money and energy, shared by `plan train` and `plan serve`:
the price of a GPU-hour, the other costs of the run (`costs:`), and how energy is counted
(`energy:`). One function turns a plan's GPU-hours and duration into its line items, energy
and carbon, so every command reports them the same way.

A plan's total cost is linear in what the search varies (GPU-hours and duration):
    total = gpu_hours x price + fixed_usd + usd_per_s x duration_s
with fixed_usd = egress (and storage held for retention_days after the run) and usd_per_s =
storage held during the run plus networking and monitoring per unit time (economics/cost.py).
`LinearCost` evaluates that over a whole plan space at once; `plan_economics` itemises one
plan with the same numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from pydantic import ConfigDict, Field, field_validator

from infraplan.catalog import load_catalog
from infraplan.economics.cost import CostBreakdown, CostInputs, plan_cost, unbilled_note
from infraplan.spec_checks import StrictNumbers
from infraplan.economics.energy import EnergyEstimate, estimate_energy, grid_intensity
from infraplan.economics.instances import Footprint, rent, training_footprint
from infraplan.errors import InputError
from infraplan.units import format_usd_rate

Pricing = Literal["on_demand", "spot", "reserved-1y", "reserved-3y"]
DEFAULT_REGION = "world"  # catalog/data/grid_intensity.yaml: Ember's 2023 world average


class EnergySpec(StrictNumbers):
    """`energy:` in a scenario. Defaults: the GPUs at their TDP (an upper bound), a new
    facility's PUE (catalog/data/onprem.yaml), the world-average grid (Ember 2023) until a
    region is named."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    utilization: float = Field(default=1.0, gt=0, le=1,
                               description="average draw as a share of TDP")
    pue: float | None = Field(default=None, ge=1, le=3,
                              description="facility / IT energy (default: onprem.yaml 'pue')")
    host_w_per_node: float = Field(default=0.0, ge=0, description="CPUs, NICs, fans per node "
                                                                  "(DGX H100: 4600)")
    region: str = Field(default=DEFAULT_REGION, description="grid region for carbon "
                        "('us-east-1', 'europe-west4'; default: the world average)")
    g_co2e_per_kwh: float | None = Field(default=None, ge=0,
                                         description="overrides the region's intensity")

    @field_validator("region")
    @classmethod
    def _known_region(cls, region: str) -> str:
        grid_intensity(region)  # did-you-mean on a typo
        return region

    def resolved_pue(self) -> float:
        if self.pue is not None:
            return self.pue
        from infraplan.economics.tco import facility_value
        return facility_value("pue")


def check_price_keys(prices: dict[str, float]) -> None:
    """Each key of a scenario's `prices:` is an accelerator of the catalog (an alias
    accepted), each accelerator priced once: a name and its alias are two prices of one chip,
    and the first would win silently. Messages follow the field's name ('prices names ...',
    'prices has unknown accelerator ...')."""
    seen: dict[str, str] = {}
    catalog = load_catalog()
    for key in prices:
        name = catalog.accelerators.get(key).name  # UnknownNameError: did you mean
        if name in seen:
            first = seen[name]
            raise InputError(f"names {name} twice: {first!r} "
                             f"(${format_usd_rate(prices[first])}) and {key!r} "
                             f"(${format_usd_rate(prices[key])}) are the same accelerator",
                             fix="keep one of them")
        seen[name] = key


def price_per_gpu_hour(gpu: str, *, prices: dict[str, float], pricing: str,
                       footprint: Footprint | None = None) -> float:
    """The scenario's price for an accelerator (keys may be aliases), else the catalog's
    for `pricing`: the offer whose whole instances cost `footprint`'s job least, spread over
    the GPUs it uses (instances.rent; None: one GPU)."""
    return priced(gpu, prices=prices, pricing=pricing, footprint=footprint)[0]


def node_gpus(gpu: str, system=None) -> int:
    """Accelerators in a node of `system` (the accelerator's default node type): what one
    rented instance must hold of a job that spans nodes."""
    from infraplan.physics import hardware

    return hardware.cluster(gpu, system).system.accelerators_per_node


def training_footprint_for(gpu: str, num_gpus: int, system=None) -> Footprint:
    """A training job of `num_gpus` on rented instances that hold its GPUs up to a node."""
    return training_footprint(num_gpus, node_gpus(gpu, system))


def given_price(gpu: str, prices: dict[str, float]) -> float | None:
    """The scenario's price for an accelerator (`prices:` keys may be aliases), or None."""
    catalog = load_catalog()
    name = catalog.accelerators.get(gpu).name
    return next((p for k, p in prices.items() if catalog.accelerators.get(k).name == name),
                None)


OWN_PRICE_BASIS = ("the scenario's price, per GPU used: whole instances are billed only "
                   "for catalog offers")


def priced(gpu: str, *, prices: dict[str, float], pricing: str,
           footprint: Footprint | None = None) -> tuple[float, str]:
    """price_per_gpu_hour and where it came from: the scenario (a price per GPU-hour of the
    user's own capacity, billed per GPU used), or the offer it picked (the cheapest in the
    catalog may be a single-GPU community instance; a cluster buyer wants to see that before
    trusting the bill)."""
    price, basis, hint, _ = _priced_per_gpu(gpu, prices, pricing, footprint)
    return price, basis + hint


def _priced_per_gpu(gpu: str, prices: dict[str, float], pricing: str,
                    footprint: Footprint | None) -> tuple[float, str, str, float]:
    """priced()'s price and basis, the hint that follows an offer's basis (how to give
    yours), and the GPUs billed per GPU the job uses (whole instances: 16 / 12 for 12 GPUs
    on 8-GPU instances; 1 for the scenario's own price)."""
    own = given_price(gpu, prices)
    if own is not None:
        return own, OWN_PRICE_BASIS, "", 1.0
    name = load_catalog().accelerators.get(gpu).name
    rental = rent(name, pricing, footprint or Footprint())
    return (rental.usd_per_gpu_hour, rental.basis(), f"; set prices: {{{name}: ...}} for yours",
            rental.billed_gpus / rental.footprint.gpus)


TERM_YEARS = {"reserved-1y": 1, "reserved-3y": 3}


def commitment_usd(pricing: str, billed_gpus: int, usd_per_gpu_hour: float) -> float:
    """What a reservation of `pricing`'s term bills whether or not the GPUs are busy:
    billed_gpus x usd_per_gpu_hour x years x 8,766.72 h (0 for on-demand and spot)."""
    from infraplan.economics.tco import HOURS_PER_YEAR

    return billed_gpus * usd_per_gpu_hour * TERM_YEARS.get(pricing, 0) * HOURS_PER_YEAR


def commitment_note(pricing: str, billed_gpus: int, usd_per_gpu_hour: float,
                    gpu_hours: float, what: str = "the job uses",
                    counts: str = "this line counts") -> str:
    """What a reserved price commits to, beside a line that counts only the hours used:
    a reservation bills every hour of its term (1 or 3 years of twelve 30.44-day months,
    tco.HOURS_PER_YEAR = 8,766.72 h) whether or not the GPUs are busy.
        committed_usd = billed_gpus x usd_per_gpu_hour x years x 8,766.72 h
        share = gpu_hours / (billed_gpus x years x 8,766.72 h)
    '' for on-demand and spot (billed by the hour used)."""
    from infraplan.economics.tco import HOURS_PER_YEAR

    years = TERM_YEARS.get(pricing)
    if not years or billed_gpus <= 0:
        return ""
    term_h = years * HOURS_PER_YEAR
    committed_usd = commitment_usd(pricing, billed_gpus, usd_per_gpu_hour)
    share = gpu_hours / (billed_gpus * term_h)
    return (f"{pricing} bills a {years}-year term: {billed_gpus} GPUs x "
            f"${format_usd_rate(usd_per_gpu_hour)} x {term_h:,.2f} h = ${committed_usd:,.0f} "
            "committed; "
            f"{counts} the {gpu_hours:,.0f} GPU-h {what} ({100 * share:.1f} % of "
            "the term)")


@dataclass(frozen=True)
class LinearCost:
    """total_usd = gpu_hours x price(gpu, instance size) + fixed_usd + usd_per_s x duration_s."""

    prices: dict[str, float]
    pricing: str
    fixed_usd: float
    usd_per_s: float
    _rates: dict = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def build(cls, gpus: list[str], *, prices: dict[str, float], pricing: str,
              costs: CostInputs) -> LinearCost:
        for g in gpus:  # an accelerator without any price fails here, before the search
            price_per_gpu_hour(g, prices=prices, pricing=pricing)
        # plan_cost is affine in duration for fixed inputs: read off its two coefficients
        month_s = 30.44 * 86400.0
        at_zero = plan_cost(0.0, 0.0, 0.0, costs).total_usd
        at_month = plan_cost(0.0, 0.0, month_s, costs).total_usd
        return cls(dict(prices), pricing, at_zero, (at_month - at_zero) / month_s)

    def usd_per_gpu_hour(self, gpu: str, num_gpus: int = 1, system=None) -> float:
        """The price of a GPU-hour of a training job of `num_gpus` (whole instances)."""
        key = (gpu, num_gpus, system)
        if key not in self._rates:
            self._rates[key] = price_per_gpu_hour(
                gpu, prices=self.prices, pricing=self.pricing,
                footprint=training_footprint_for(gpu, num_gpus, system))
        return self._rates[key]

    def total_usd(self, gpu: str, gpu_hours, duration_s, num_gpus=1, system=None):
        """Vectorised over plans; `num_gpus` (each plan's) may be an array, priced once per
        distinct count."""
        counts, at = np.unique(np.asarray(num_gpus), return_inverse=True)
        rate = np.array([self.usd_per_gpu_hour(gpu, int(n), system) for n in counts])[at]
        rate = rate.reshape(np.shape(num_gpus))
        return np.asarray(gpu_hours) * rate + self.fixed_usd + \
            self.usd_per_s * np.asarray(duration_s)


@dataclass(frozen=True)
class PlanEconomics:
    cost: CostBreakdown | None  # None: no price for the accelerator (energy still counts)
    energy: EnergyEstimate
    usd_per_gpu_hour: float | None
    pricing: str
    missing_price: str = ""  # why there is no cost
    billed_gpus: int | None = None  # on whole instances: may exceed the GPUs used
    unbilled_note: str = ""  # the kinds of cost the scenario's costs: leaves out
    price_basis: str = ""  # where usd_per_gpu_hour comes from (the offer, or the scenario)

    def to_json(self) -> dict:
        e = self.energy
        return {"cost": self.cost.to_dict() if self.cost else None,
                "usd_per_gpu_hour": self.usd_per_gpu_hour, "price_basis": self.price_basis,
                "pricing": self.pricing,
                "billed_gpus": self.billed_gpus, "unbilled_note": self.unbilled_note,
                "missing_price": self.missing_price, "energy_kwh": e.energy_kwh,
                "carbon_kg_co2e": e.carbon_kg_co2e, "g_co2e_per_kwh": e.g_co2e_per_kwh,
                "region": e.region, "energy_formula": e.formula,
                "intensity_note": e.intensity_note, "host_note": e.host_note}


def plan_economics(gpu: str, num_gpus: int, gpu_hours: float, duration_s: float, *,
                   prices: dict[str, float], pricing: str, costs: CostInputs,
                   energy: EnergySpec, compute_label: str = "compute",
                   footprint: Footprint | None = None,
                   user: str = "the job uses", checkpoints: bool = True) -> PlanEconomics:
    """Line items, energy and carbon of one plan that keeps `num_gpus` busy `duration_s`,
    priced on whole instances as `footprint` fills them (instances.rent). Without a price for
    the accelerator the cost is None and says why; energy and carbon are always there.
    A reserved price's line states the term it commits to (commitment_note; `user`: whose
    GPU-hours the line counts, with its verb; `checkpoints`: whether the workload writes
    them, for the note of what `costs` leaves unbilled)."""
    estimate = estimate_energy(gpu, num_gpus, duration_s, utilization=energy.utilization,
                               pue=energy.resolved_pue(), region=energy.region,
                               g_co2e_per_kwh=energy.g_co2e_per_kwh,
                               host_w_per_node=energy.host_w_per_node)
    try:
        price, offer_basis, hint, billed_per_used = _priced_per_gpu(gpu, prices, pricing,
                                                                    footprint)
    except InputError as exc:
        return PlanEconomics(None, estimate, None, pricing, missing_price=str(exc))
    billed = math.ceil(num_gpus * billed_per_used - 1e-9)
    note = commitment_note(pricing, billed, price * num_gpus / billed, gpu_hours, user)
    basis = offer_basis + hint + (f"; {note}" if note else "")
    label = f"{compute_label} ({pricing.replace('_', '-')})"
    breakdown = plan_cost(gpu_hours, price, duration_s, costs, compute_label=label,
                          price_basis=basis, billed_per_used=billed / num_gpus)
    return PlanEconomics(breakdown, estimate, price, pricing, billed_gpus=billed,
                         unbilled_note=unbilled_note(costs, checkpoints=checkpoints),
                         price_basis=offer_basis)
