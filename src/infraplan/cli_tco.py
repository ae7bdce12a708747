"""`infraplan tco SERVER`: registered by src/infraplan/cli.py. Owning one server a year and
per GPU-hour (economics/tco.py), and the break-evens against renting and against an API."""

from __future__ import annotations

import argparse
from functools import lru_cache

from infraplan.errors import InputError
from infraplan.report.output import add_output_flags, emit

# flag -> onprem_cost argument, for the figures a user may put in place of onprem.yaml's
COST_FLAGS = {"--price-usd-per-server": "price_usd", "--years": "amortization_years",
              "--pue": "pue", "--usd-per-kwh": "usd_per_kwh",
              "--colocation-usd-per-kw-month": "colocation_usd_per_kw_month",
              "--operations-fraction": "operations_fraction_per_year"}
DEFAULT_REGION = "us-industrial-average"  # onprem_cost's default electricity row


@lru_cache(maxsize=1)
def _onprem_defaults() -> tuple[list[str], dict[str, float]]:
    """The electricity rows' names and the facility constants, read from onprem.yaml for
    --help alone (the validated load, economics/tco.load_onprem, checks every accelerator:
    too slow to pay on every command's start)."""
    import yaml

    from infraplan.catalog import DATA_DIR

    raw = yaml.safe_load((DATA_DIR / "onprem.yaml").read_text())
    return (sorted(row["name"] for row in raw["electricity"]),
            {row["name"]: row["value"] for row in raw["facility"]})


def _with_fix(parse, fix: str):
    """An argparse type that refuses what `parse` refuses, adding how to fix it: a fraction
    written as a percentage (5 for 5 %) is the slip these flags' bounds catch."""
    def checked(text: str) -> float:
        try:
            return parse(text)
        except argparse.ArgumentTypeError as exc:
            raise argparse.ArgumentTypeError(f"{exc}. To fix: {fix}") from None
    return checked


def add_tco(sub, number) -> None:
    """`number(low, above=..., high=...)` is cli.py's argparse type for a bounded number."""
    from infraplan.economics.tco import (AMORTIZATION_YEARS_RANGE, MAX_RENT_USD_PER_GPU_HOUR,
                                         OPERATIONS_FRACTION_FIX, OPERATIONS_FRACTION_RANGE,
                                         PUE_FIX, PUE_RANGE, TYPICAL_PUE_RANGE,
                                         UTILIZATION_RANGE)

    regions, facility = _onprem_defaults()
    p = sub.add_parser(
        "tco", help="own vs rent: on-prem cost per GPU-hour and break-evens",
        description="Cost of owning one server (capex amortised, power, facility, "
                    "operations) and when buying beats renting or an API. Defaults are "
                    "catalog/data/onprem.yaml's; 'infraplan catalog servers' and 'infraplan "
                    "catalog regions' list its rows.")
    p.add_argument("server", help="server in catalog/data/onprem.yaml (dgx-h100, ...)")
    low, high = UTILIZATION_RANGE
    p.add_argument("--utilization", default=0.7,
                   type=_with_fix(number(low, above=False, high=high),
                                  "give a share of the year's hours: write 0.7 for 70 %"),
                   help=f"share of the year's hours the GPUs are in use, {low:g} to {high:g} "
                        "(default: %(default)s); sets the cost per used GPU-hour and the "
                        "hours rented instead")
    p.add_argument("--rent", type=number(0, above=False, high=MAX_RENT_USD_PER_GPU_HOUR),
                   help="rental USD per GPU-hour to compare with, 0 to "
                        f"{MAX_RENT_USD_PER_GPU_HOUR:,g} (default: no comparison)")
    low, high = AMORTIZATION_YEARS_RANGE
    p.add_argument("--years", type=number(low, above=False, high=high),
                   help=f"useful life the price is amortised over, {low:g} to {high:g} years "
                        f"(default: {facility['amortization-years']:g})")
    p.add_argument("--region",
                   help=f"electricity price row (default: {DEFAULT_REGION}); one of "
                        f"{', '.join(regions)}, or an alias such as 'tx'")
    p.add_argument("--usd-per-kwh", type=number(0, above=False),
                   help="electricity price in USD per kWh, >= 0, in place of --region's "
                        "(0 for a colocation contract that includes energy)")
    p.add_argument("--price-usd-per-server", type=number(0, above=True),
                   help="purchase price of one server in USD, > 0: your quote (default: the "
                        "server's catalog price, often an estimate)")
    low, high = PUE_RANGE
    p.add_argument("--pue", type=_with_fix(number(low, above=False, high=high), PUE_FIX),
                   help=f"facility kWh per IT kWh, {low:g} to {high:g}; real data centres run "
                        f"{TYPICAL_PUE_RANGE[0]:.1f} to {TYPICAL_PUE_RANGE[1]:.1f} (default: "
                        f"{facility['pue']:g})")
    p.add_argument("--colocation-usd-per-kw-month", type=number(0, above=False),
                   help="USD per kW of provisioned server power per month, >= 0 (default: "
                        f"{facility['colocation-usd-per-kw-month']:g})")
    low, high = OPERATIONS_FRACTION_RANGE
    p.add_argument("--operations-fraction",
                   type=_with_fix(number(low, above=False, high=high), OPERATIONS_FRACTION_FIX),
                   help="staff, support and spares a year as a fraction of the price, "
                        f"{low:g} to {high:g}: 0.05 is 5 %% (default: "
                        f"{facility['operations-fraction-of-capex-per-year']:g})")
    p.add_argument("--api-usd-per-m", type=number(0, above=False),
                   help="API price per million tokens, >= 0 (needs --tokens-per-s)")
    p.add_argument("--tokens-per-s", type=number(0, above=True),
                   help="tokens/s the server serves at most, > 0 (needs --api-usd-per-m)")
    add_output_flags(p)
    p.set_defaults(run=run_tco)


def run_tco(args) -> int:
    from dataclasses import asdict

    from infraplan.economics.tco import EXCLUDED, buy_vs_rent, onprem_cost, server_vs_api
    from infraplan.report.tco import tco_headline, tco_report

    if (args.api_usd_per_m is None) != (args.tokens_per_s is None):  # one without the other
        given, missing = (("--api-usd-per-m", "--tokens-per-s") if args.tokens_per_s is None
                          else ("--tokens-per-s", "--api-usd-per-m"))
        raise InputError(f"{given} needs {missing}: self-hosting vs an API compares the "
                         "server's throughput with the API's price per million tokens",
                         fix=f"add {missing}, or drop {given}")
    flags = {flag: getattr(args, flag[2:].replace("-", "_")) for flag in COST_FLAGS}
    set_flags = {flag: value for flag, value in flags.items() if value is not None}
    kw = {COST_FLAGS[flag]: value for flag, value in set_flags.items()}
    if args.region is not None and args.usd_per_kwh is not None:
        raise InputError("--region and --usd-per-kwh both set the electricity price",
                         fix="keep one of them")
    kw["electricity_region"] = args.region or DEFAULT_REGION
    own = onprem_cost(args.server, args.utilization, **kw)
    rent = None if args.rent is None else buy_vs_rent(args.server, args.utilization,
                                                      args.rent, **kw)
    api = None if args.api_usd_per_m is None else \
        server_vs_api(args.server, args.tokens_per_s, args.api_usd_per_m, **kw)
    out = {"onprem": {**asdict(own), "usd_per_year": own.usd_per_year,
                      "usd_per_gpu_hour": own.usd_per_gpu_hour, "excludes": EXCLUDED},
           "buy_vs_rent": asdict(rent) if rent else None,
           "self_host_vs_api": asdict(api) if api else None}
    return emit(args, "tco", out, lambda: tco_report(own, rent, api, set_flags),
                lambda: tco_headline(own, rent, api))
