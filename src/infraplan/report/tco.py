"""Terminal view of `infraplan tco`: owning a server per year and per GPU-hour, and the
break-evens against renting and against a per-token API."""

from __future__ import annotations

from infraplan.report.terminal import table
from infraplan.units import format_usd_rate


def tco_report(own, rent=None, api=None, rent_usd_per_gpu_hour: float | None = None
               ) -> str:
    lines = [f"{own.server}: {own.gpus} GPUs bought for ${own.capex_usd:,.0f}, amortised "
             f"over {own.amortization_years:g} years, {own.utilization:.0%} utilised", "",
             table(["per year", "USD", "how"],
                   [[i.name, f"${i.usd:,.0f}", i.formula] for i in own.items],
                   align_right=[1]),
             "",
             f"${own.usd_per_year:,.0f} a year over {own.gpu_hours_per_year:,.0f} used "
             f"GPU-hours: ${own.usd_per_gpu_hour:,.2f} per GPU-hour"]
    if rent is not None:
        per_gpu = "" if rent.gpu_hours is None else \
            f"; {rent.gpu_hours / own.gpus:,.0f} GPU-hours per GPU"
        lines.append(f"buy vs rent at ${rent_usd_per_gpu_hour:,.2f} per GPU-hour: "
                     f"{rent.message}{per_gpu}")
    if api is not None:
        lines.append(f"self-host vs API at ${format_usd_rate(api.api_usd_per_million)} per "
                     f"million tokens: {api.message}")
    return "\n".join(lines)
