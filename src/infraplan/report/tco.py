"""Terminal view of `infraplan tco`: owning a server per year and per GPU-hour, and the
break-evens against renting and against a per-token API."""

from __future__ import annotations

import textwrap

from infraplan.report.terminal import table
from infraplan.units import format_figure, format_usd_rate

WIDTH = 100


def _wrap(text: str) -> str:
    return textwrap.fill(text, width=WIDTH, subsequent_indent="  ")


def _price_lines(own) -> list[str]:
    """'price: $270,000 a server (estimate: ...; set --price-usd-per-server ...)' and its
    source, so that an analyst's estimate does not read as a quote."""
    price = own.price
    if price.retrieved is None:
        return [f"price: ${price.usd:,.0f} a server (given with --price-usd-per-server)"]
    why = price.notes.split(". ")[0].rstrip(".") if price.notes else price.source
    kind = f"estimate: {why}" if price.estimate else "catalog price"
    return [_wrap(f"price: ${price.usd:,.0f} a server ({kind}; set --price-usd-per-server "
                  "for your quote)"),
            _wrap(f"  source: {price.source} (retrieved {price.retrieved})")]


def tco_report(own, rent=None, api=None, set_flags: dict[str, float] | None = None) -> str:
    """The user's own prices (--rent, --api-usd-per-m) are echoed as given: $6.155, not
    $6.16 (units.format_usd_rate)."""
    from infraplan.economics.tco import EXCLUDED

    lines = [f"{own.server}: {own.gpus} GPUs, amortised over {own.amortization_years:g} "
             f"years, {own.utilization:.0%} utilised", *_price_lines(own)]
    if set_flags:
        lines.append(_wrap("set on the command line: " + ", ".join(
            f"{flag} {format_figure(value)}" for flag, value in set_flags.items())))
    lines += ["", table(["per year", "USD", "how"],
                        [[i.name, f"${i.usd:,.0f}", i.formula] for i in own.items],
                        align_right=[1]),
              "",
              f"${own.usd_per_year:,.0f} a year over {own.gpu_hours_per_year:,.0f} used "
              f"GPU-hours: ${own.usd_per_gpu_hour:,.2f} per GPU-hour",
              _wrap(f"not included: {EXCLUDED}")]
    if rent is not None:
        lines.append(_wrap(f"buy vs rent at ${format_usd_rate(rent.rent_usd_per_gpu_hour)} "
                           f"per GPU-hour: {_rent_verdict(own, rent)}"))
    if api is not None:
        lines.append(_wrap(f"self-host vs API at ${format_usd_rate(api.api_usd_per_million)} "
                           f"per million tokens: {api.message}"))
    return "\n".join(lines)


def _rent_verdict(own, rent) -> str:
    per_gpu = "" if rent.gpu_hours is None else \
        f"; {rent.gpu_hours / own.gpus:,.0f} GPU-hours per GPU"
    return rent.message + per_gpu


def tco_headline(own, rent=None, api=None) -> str:
    """--quiet: the cost per GPU-hour and each verdict asked for."""
    return "; ".join([f"${own.usd_per_gpu_hour:,.2f} per GPU-hour owned",
                      *([f"rent: {rent.message}"] if rent else []),
                      *([f"API: {api.message}"] if api else [])])
