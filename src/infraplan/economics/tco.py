"""On-premises total cost of ownership, cost per GPU-hour, and two break-evens.

Figures (server prices, electricity prices, PUE, colocation, operations, useful life) live in
catalog/data/onprem.yaml with their sources; estimates are marked there. Every argument can
override them. Time: a month is 30.44 days (cost.py), a year twelve such months (8,766.72 h).

Cost of owning one server with G GPUs for a year, at utilization u (0.01 <= u <= 1):
    capex       = price_usd / amortization_years                 (straight line, no residual
                                                                  value, no cost of capital)
    power       = (G x tdp_w + host_w) x u x H_y x pue x usd_per_kwh / 1000
                  host_w = system_power_w - G x tdp_w (the rest of the server, see energy.py);
                  0 with include_host=False
    facility    = colocation_usd_per_kw_month x system_power_w / 1000 x 12
                  (colocation bills provisioned kW whether used or not; energy is extra)
    operations  = operations_fraction_per_year x price_usd
                  (bounds: 0 to 1 for the fraction, 1 to 3 for pue; the ranges below)
    cost per used GPU-hour = (capex + power + facility + operations) / (G x H_y x u)
Only the power term grows with u, and it grows in proportion to the GPU-hours, so the cost
per GPU-hour = fixed / (G x H_y x u) + constant falls as utilization rises.

Left out (EXCLUDED): the cost of capital, a residual value, and what the server price leaves
out (onprem.yaml: cluster switches, cables, racks, storage systems).
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from functools import lru_cache

import yaml
from pydantic import Field, ValidationError

from infraplan.checks import check_number
from infraplan.catalog import DATA_DIR, accelerator
from infraplan.catalog.schema import Constant, Row
from infraplan.catalog.table import Table, describe_validation
from infraplan.economics.cost import HOURS_PER_MONTH, SECONDS_PER_MONTH, LineItem
from infraplan.economics.energy import energy_kwh
from infraplan.errors import InputError
from infraplan.units import format_usd_rate, three_figures

HOURS_PER_YEAR = 12 * HOURS_PER_MONTH  # 8,766.72 h
SECONDS_PER_YEAR = HOURS_PER_YEAR * 3_600.0
ONPREM_FILE = DATA_DIR / "onprem.yaml"
EXCLUDED = ("cost of capital, residual value, and cluster switches, cables, racks and storage "
            "systems (the server price is one server as configured)")


class Server(Row):
    accelerator: str = Field(description="accelerator row name")
    gpus_per_server: int = Field(ge=1)
    price_usd: float = Field(gt=0, description="purchase price of one server")
    system_power_w: float = Field(gt=0, description="vendor maximum system input power")
    estimate: bool = False


class ElectricityPrice(Row):
    usd_per_kwh: float = Field(ge=0)
    year: int = Field(ge=1990, le=2100)
    estimate: bool = False


@dataclass(frozen=True)
class OnPremData:
    servers: Table[Server]
    electricity: Table[ElectricityPrice]
    facility: Table[Constant]


@lru_cache(maxsize=1)
def load_onprem() -> OnPremData:
    raw = yaml.safe_load(ONPREM_FILE.read_text())
    tables = {}
    for key, row_type, kind in (("servers", Server, "server"),
                                ("electricity", ElectricityPrice, "electricity price"),
                                ("facility", Constant, "facility constant")):
        rows = []
        for i, item in enumerate(raw.get(key) or []):
            try:
                rows.append(row_type.model_validate(item))
            except ValidationError as exc:
                name = item.get("name", f"row {i}") if isinstance(item, dict) else f"row {i}"
                raise InputError(f"onprem.yaml: {kind} {name!r}: "
                                 f"{describe_validation(exc)}") from None
        tables[key] = Table(kind, rows)
    data = OnPremData(**tables)
    for row in data.servers:
        accelerator(row.accelerator)  # every server points at a known accelerator
    return data


def server(name: str) -> Server:
    """A server row by name or alias ('dgx-h100', 'h100-8x')."""
    return load_onprem().servers.get(
        name, fix="name a server from catalog/data/onprem.yaml, or add a row with its source")


REGION_FIX = ("name a region from catalog/data/onprem.yaml (electricity) with tco --region; "
              "from Python, onprem_cost(usd_per_kwh=...) sets the price directly")


def electricity_price(region: str, fix: str = REGION_FIX) -> ElectricityPrice:
    """An electricity price row ('us-industrial-average', 'virginia', 'tx'); `fix` is the
    hint an unknown region gets, naming the option the caller has."""
    return load_onprem().electricity.get(region, fix=fix)


def facility_value(name: str) -> float:
    """A facility constant: 'pue', 'pue-industry-average', 'colocation-usd-per-kw-month',
    'operations-fraction-of-capex-per-year', 'amortization-years'."""
    return load_onprem().facility.get(
        name, fix="name a constant from catalog/data/onprem.yaml (facility)").value


# Ranges outside which an argument is a slip, not a plan: a 1e-320-year life made capex
# infinite, 1e-300 utilization or rent of $1e308 per GPU-hour printed 300-digit figures.
# Useful life: a quarter (the shortest lease or refresh) to 30 years (servers are written
# off in 3-7; onprem.yaml, amortization-years). Utilization: 1 % is 88 hours a year, below
# which a cost per used GPU-hour says nothing about owning. Rent: $1,000 per GPU-hour is
# some 80x the dearest on-demand GPU-hour in the catalog (8-GPU instances at up to
# $98.32/h, catalog/data prices).
# PUE: 1 is a facility that spends nothing beyond the IT load; real data centres run 1.1 to
# 2.0 (onprem.yaml: 1.3 for new builds, 1.58 the 2023 industry average), so above 3 is a
# slip, not a building (--pue 50 was priced without a word). Operations: staff, support and
# spares a year as a fraction of the price (onprem.yaml: 0.05); above 1 they would cost more
# than the server every year (--operations-fraction 5, meant as 5 %, priced 500 %).
AMORTIZATION_YEARS_RANGE = (0.25, 30.0)
UTILIZATION_RANGE = (0.01, 1.0)
MAX_RENT_USD_PER_GPU_HOUR = 1_000.0
PUE_RANGE = (1.0, 3.0)
TYPICAL_PUE_RANGE = (1.1, 2.0)
OPERATIONS_FRACTION_RANGE = (0.0, 1.0)
OPERATIONS_FRACTION_FIX = "give a fraction of the server price a year: write 0.05 for 5 %"
PUE_FIX = (f"give facility kWh per IT kWh, {PUE_RANGE[0]:g} to {PUE_RANGE[1]:g}: real data "
           f"centres run {TYPICAL_PUE_RANGE[0]:.1f} to {TYPICAL_PUE_RANGE[1]:.1f}")


def _in_range(name: str, value: float, low: float, high: float, *, fix: str):
    """value as a float in [low, high], else an InputError naming `name` and the range."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not (number and math.isfinite(value) and low <= value <= high):
        raise InputError(f"{name} must be between {low:g} and {high:,g} (got {value!r})",
                         fix=fix)
    return float(value)


def _number(name: str, value: float, **bounds) -> float:
    """`value` as a float within `bounds` (checks.check_number), else an InputError."""
    return float(check_number(name, value, **bounds))


@dataclass(frozen=True)
class ServerPrice:
    """Where the purchase price came from: the catalog row (estimate or not) or the caller."""
    usd: float
    estimate: bool
    source: str
    retrieved: dt.date | None  # None: given by the caller
    notes: str = ""


@dataclass(frozen=True)
class OnPremCost:
    server: str
    gpus: int
    utilization: float
    capex_usd: float  # purchase price, paid up front
    price: ServerPrice
    electricity_region: str | None  # None: usd_per_kwh given by the caller
    usd_per_kwh: float
    pue: float
    colocation_usd_per_kw_month: float  # per kW of the server's maximum input power
    operations_fraction_per_year: float  # of the purchase price
    given: tuple[str, ...]  # the arguments the caller set rather than onprem.yaml
    amortization_years: float
    items: tuple[LineItem, ...]  # per year: capex (amortised), power, facility, operations
    gpu_hours_per_year: float  # used GPU-hours: gpus x 8,766.72 h x utilization

    @property
    def usd_per_year(self) -> float:
        return math.fsum(item.usd for item in self.items)

    @property
    def usd_per_gpu_hour(self) -> float:
        return self.usd_per_year / self.gpu_hours_per_year

    @property
    def running_usd_per_month(self) -> float:
        """Power + facility + operations per month: what owning costs once it is paid for."""
        return math.fsum(i.usd for i in self.items if i.name != "capex") / 12


def onprem_cost(server_name: str, utilization: float, *, price_usd: float | None = None,
                amortization_years: float | None = None, pue: float | None = None,
                usd_per_kwh: float | None = None,
                electricity_region: str = "us-industrial-average",
                colocation_usd_per_kw_month: float | None = None,
                operations_fraction_per_year: float | None = None,
                include_host: bool = True) -> OnPremCost:
    """Yearly cost of owning one server and its cost per used GPU-hour (module docstring).

    Defaults come from onprem.yaml: the server's price and power, 'pue', the electricity
    price of `electricity_region`, 'colocation-usd-per-kw-month',
    'operations-fraction-of-capex-per-year', 'amortization-years'.
    """
    row = server(server_name)
    gpu = accelerator(row.accelerator)
    u = _in_range("utilization (tco --utilization)", utilization, *UTILIZATION_RANGE,
                  fix="give the share of the year's hours the GPUs are in use, 0.01 to 1 "
                      "(e.g. 0.7)")
    price = _number("price_usd", row.price_usd if price_usd is None else price_usd, gt=0)
    price_row = ServerPrice(row.price_usd, row.estimate, row.source, row.retrieved,
                            row.notes) if price_usd is None else \
        ServerPrice(price, False, "given (price_usd)", None)
    region = None if usd_per_kwh is not None else electricity_price(electricity_region)
    years = _in_range("amortization_years (tco --years)", facility_value("amortization-years")
                      if amortization_years is None else amortization_years,
                      *AMORTIZATION_YEARS_RANGE,
                      fix="give the server's useful life in years, 0.25 to 30 (onprem.yaml "
                          "assumes 4)")
    pue_in = pue
    pue = _in_range("pue (tco --pue)", facility_value("pue") if pue is None else pue,
                    *PUE_RANGE, fix=PUE_FIX)
    kwh_price = _number("usd_per_kwh", region.usd_per_kwh if region else usd_per_kwh, ge=0)
    colo = _number("colocation_usd_per_kw_month", facility_value("colocation-usd-per-kw-month")
                   if colocation_usd_per_kw_month is None else colocation_usd_per_kw_month, ge=0)
    ops = _in_range("operations_fraction_per_year (tco --operations-fraction)",
                    facility_value("operations-fraction-of-capex-per-year")
                    if operations_fraction_per_year is None else operations_fraction_per_year,
                    *OPERATIONS_FRACTION_RANGE, fix=OPERATIONS_FRACTION_FIX)

    g = row.gpus_per_server
    host_w = max(row.system_power_w - g * gpu.tdp_watts, 0.0) if include_host else 0.0
    kwh = energy_kwh(g, gpu.tdp_watts, u, SECONDS_PER_YEAR, pue=pue,
                     host_w_per_node=host_w, gpus_per_node=g)
    system_kw = row.system_power_w / 1000
    items = (
        LineItem("capex", price / years, f"${price:,.0f} / {years:g} years (straight line)"),
        LineItem("power", kwh * kwh_price,
                 f"({g} x {gpu.tdp_watts:,.0f} W + {host_w:,.0f} W host) x {u:g} x "
                 f"{HOURS_PER_YEAR:,.2f} h x PUE {pue:g} = {kwh:,.0f} kWh x "
                 f"${format_usd_rate(kwh_price)}/kWh "
                 + (f"({region.name}, {region.year})" if region else "(given)")),
        LineItem("facility", colo * system_kw * 12,
                 f"${format_usd_rate(colo)}/kW-month x {system_kw:g} kW x 12 months"),
        LineItem("operations", ops * price, f"{ops:g} x ${price:,.0f} per year"),
    )
    given = tuple(name for name, value in (
        ("price_usd", price_usd), ("amortization_years", amortization_years), ("pue", pue_in),
        ("usd_per_kwh", usd_per_kwh),
        ("colocation_usd_per_kw_month", colocation_usd_per_kw_month),
        ("operations_fraction_per_year", operations_fraction_per_year)) if value is not None)
    return OnPremCost(server=row.name, gpus=g, utilization=u, capex_usd=price, price=price_row,
                      electricity_region=region.name if region else None,
                      usd_per_kwh=kwh_price, pue=pue, colocation_usd_per_kw_month=colo,
                      operations_fraction_per_year=ops, given=given,
                      amortization_years=years, items=items,
                      gpu_hours_per_year=g * HOURS_PER_YEAR * u)


@dataclass(frozen=True)
class BuyVsRent:
    months: float | None  # None: owning never catches up at these prices
    gpu_hours: float | None  # used GPU-hours at the crossing
    capex_usd: float
    own_usd_per_month: float  # running cost after the purchase
    rent_usd_per_gpu_hour: float  # the rental price compared with, as given
    rent_usd_per_month: float
    within_life: bool  # the crossing comes before the end of the amortization period
    message: str


def buy_vs_rent(server_name: str, utilization: float, rent_usd_per_gpu_hour: float,
                **onprem_kwargs) -> BuyVsRent:
    """Months until the cumulative cost of buying one server is <= renting the same GPU-hours.

    Derivation. At utilization u the server's G GPUs do G u H_m GPU-hours a month
    (H_m = 730.56 h). Renting exactly those hours at r $/GPU-hour costs, after m months,
        R(m) = m G u H_m r.
    Buying costs the price K at once, then the running cost O(u) = power + facility +
    operations per month (onprem_cost; capex is not amortised here, it is cash out):
        C(m) = K + m O(u).
    C(m) <= R(m)  <=>  m (G u H_m r - O(u)) >= K  <=>  m >= K / (G u H_m r - O(u)),
    which exists only when renting costs more per month than running the server
    (G u H_m r > O(u)); otherwise the lines never cross. The GPU-hours at the crossing are
    m* G u H_m. The result is the same per server and for a fleet of identical servers.
    """
    rent = _in_range("rent_usd_per_gpu_hour (tco --rent)", rent_usd_per_gpu_hour, 0.0,
                     MAX_RENT_USD_PER_GPU_HOUR,
                     fix="give the rental price of one GPU for one hour in USD (e.g. 2.5; "
                         "an 8-GPU instance's hourly price / 8)")
    own = onprem_cost(server_name, utilization, **onprem_kwargs)
    used_hours_per_month = own.gpus * own.utilization * HOURS_PER_MONTH
    rent_month = used_hours_per_month * rent
    run_month = own.running_usd_per_month
    life_months = 12 * own.amortization_years
    if rent_month <= run_month:
        return BuyVsRent(None, None, own.capex_usd, run_month, rent, rent_month, False,
                         f"never: renting {used_hours_per_month:,.0f} GPU-h/month costs "
                         f"${rent_month:,.0f}, no more than the server's running costs "
                         f"(power, facility, operations, excluding the purchase: "
                         f"${run_month:,.0f}/month)")
    months = own.capex_usd / (rent_month - run_month)
    within = months <= life_months
    life = f"the assumed {life_months / 12:g}-year life"
    crossing = f"{months:,.1f} months ({months * used_hours_per_month:,.0f} GPU-hours)"
    return BuyVsRent(months, months * used_hours_per_month, own.capex_usd, run_month, rent,
                     rent_month, within,
                     f"buying pays off after {crossing}, within {life}" if within else
                     f"renting is cheaper: buying would pay off after {crossing}, "
                     f"beyond {life}")


def tokens_text(n: float) -> str:
    """A token count in words, never in exponent form: '13.1 billion', '450 million', '9,500'."""
    for scale, word in ((1e12, "trillion"), (1e9, "billion"), (1e6, "million")):
        if abs(n) >= scale:
            return f"{three_figures(n / scale)} {word}"
    return f"{n:,.0f}"


def usd_per_million_text(x: float) -> str:
    """$ per million tokens: to the cent from $0.10 ('0.72'), finer below ('0.0042')."""
    return f"{x:,.2f}" if x >= 0.10 else format_usd_rate(x)


def _dearer_text(usd: float, than_usd: float) -> str:
    """`usd` (> than_usd) per million tokens to the cent, or finer where the cents would not
    read as more than `than_usd` (printed as given): $0.1249 against an API's $0.1245."""
    text = usd_per_million_text(usd)
    return text if float(text.replace(",", "")) > than_usd else format_usd_rate(usd)


@dataclass(frozen=True)
class SelfHostVsApi:
    tokens_per_month: float | None  # break-even volume; None: the API is always cheaper
    tokens_per_s: float  # the deployment's throughput at most, as given
    capacity_tokens_per_month: float
    self_host_usd_per_million_at_capacity: float
    api_usd_per_million: float
    fixed_usd_per_month: float  # paid whatever the load
    load_usd_per_month_at_capacity: float  # grows in proportion to the load (power)
    load_share: float | None  # tokens_per_month / capacity
    message: str


def self_host_vs_api(throughput_tokens_per_s: float, monthly_cost_usd: float,
                     api_usd_per_million_tokens: float, *,
                     load_usd_per_month_at_capacity: float = 0.0) -> SelfHostVsApi:
    """Tokens a month at which a self-hosted deployment costs the same as an API.

    Derivation. A deployment able to serve at most S tokens/s has a capacity of
    C = S x 2,630,016 s tokens a month. Serving T = x C tokens (load share 0 < x <= 1) costs
    F + x V a month: F (monthly_cost_usd) is paid whatever the load (capex, facility,
    operations); V (load_usd_per_month_at_capacity) is what grows with the load, power, at
    full load. The API charges p $ per million tokens: x C p / 1e6. Equal when
        F + x V = x C p / 1e6  <=>  x* = F / (C p / 1e6 - V),  T* = x* C.
    Above T* self-hosting is cheaper. T* exists only if C p / 1e6 > V and x* <= 1, i.e. the
    deployment at full load costs no more per million tokens than the API:
    (F + V) x 1e6 / C <= p. Otherwise (or with p = 0) the API is always cheaper.
    """
    s = _number("throughput_tokens_per_s", throughput_tokens_per_s, gt=0)
    m = _number("monthly_cost_usd", monthly_cost_usd, ge=0)
    v = _number("load_usd_per_month_at_capacity", load_usd_per_month_at_capacity, ge=0)
    p = _number("api_usd_per_million_tokens", api_usd_per_million_tokens, ge=0)
    capacity = s * SECONDS_PER_MONTH
    at_capacity = (m + v) * 1e6 / capacity
    api_at_capacity = capacity * p / 1e6
    if p == 0 or m + v > api_at_capacity:
        return SelfHostVsApi(None, s, capacity, at_capacity, p, m, v, None,
                             f"never: even at full load ({tokens_text(capacity)} tokens/month) "
                             f"self-hosting costs ${_dearer_text(at_capacity, p)} per "
                             f"million tokens, more than the API's ${format_usd_rate(p)}")
    share = m / (api_at_capacity - v) if m else 0.0
    tokens = share * capacity
    return SelfHostVsApi(tokens, s, capacity, at_capacity, p, m, v, share,
                         f"self-hosting is cheaper above {tokens_text(tokens)} tokens/month "
                         f"({share:.1%} of its capacity)")


def server_vs_api(server_name: str, throughput_tokens_per_s: float,
                  api_usd_per_million_tokens: float, **onprem_kwargs) -> SelfHostVsApi:
    """self_host_vs_api for one owned server (onprem_cost arguments but utilization): the
    fixed cost is capex + facility + operations, and the power at full load (u = 1) is the
    part that grows with the load, in proportion (power = ... x u, module docstring). The
    utilization the cost per GPU-hour assumes plays no part: the load is what is solved for.
    """
    full = onprem_cost(server_name, 1.0, **onprem_kwargs)
    power = math.fsum(i.usd for i in full.items if i.name == "power")
    return self_host_vs_api(throughput_tokens_per_s, (full.usd_per_year - power) / 12,
                            api_usd_per_million_tokens,
                            load_usd_per_month_at_capacity=power / 12)
