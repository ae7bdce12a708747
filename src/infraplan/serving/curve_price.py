"""The price of a million output tokens over a month of time-varying (diurnal) traffic.

A deployment sized for the day's peak runs, and is billed, around the clock, but carries
the curve's mean rate, not the peak's. Priced at the output rate of a simulation at the
peak, its $/M output tokens does not match the month's bill (serve-llama70b-diurnal.yaml:
$1.842 at 12 requests/s, while the month's $17,241 over its 4.6 billion output tokens is
$3.73). Over the month:

    $/M out tok = month cost / (mean rate over the curve x mean output tokens per
                  completed request x seconds in the month) x 1e6

the month being economics/cost.py's (30.44 days: 365.25 / 12), the mean output that of
the requests a simulation completed. A constant-rate scenario keeps the simulation's
figure: $/h over the output tokens an hour at its rate."""

from __future__ import annotations

from pathlib import Path

from infraplan.economics.cost import SECONDS_PER_MONTH
from infraplan.serving.traffic import mean_rate_per_s

CURVE_LABEL = "over the day's curve"  # what a month's per-token price is labelled


def curve_usd_per_million_output(scenario, month_usd: float, summary: dict | None,
                                 base_dir: Path | None = None) -> float | None:
    """A month's cost over the output tokens of a month of the scenario's diurnal curve,
    per million (None: a constant rate, or a simulation that completed nothing)."""
    if scenario.traffic.arrival.kind != "diurnal" or not summary:
        return None
    run = summary["throughput"]
    if not run["requests_per_s"] or not run["output_tokens_per_s"]:
        return None
    output_tokens_per_request = run["output_tokens_per_s"] / run["requests_per_s"]
    month_tokens = (mean_rate_per_s(scenario.traffic, base_dir=base_dir)
                    * output_tokens_per_request * SECONDS_PER_MONTH)
    return month_usd / month_tokens * 1e6
