"""The price of a million output tokens over a month of time-varying (diurnal) traffic.

A deployment sized for the day's peak runs, and is billed, around the clock, but carries
the curve's mean rate, not the peak's. Priced at the output rate of a simulation at the
peak, its $/M output tokens does not match the month's bill (serve-llama70b-diurnal.yaml:
$1.842 at 12 requests/s, while the month's $17,241 over its 4.6 billion output tokens is
$3.70). Over the month:

    $/M out tok = month cost / (mean rate over the curve x mean output tokens per
                  request x seconds in the month) x 1,000,000

the month being economics/cost.py's (30.44 days: 365.25 / 12), the mean output the
workload's (lengths.expected_length), not a simulation's sample of it: deployments billed
the same carry the same month of tokens, so they get the same price per token. A
constant-rate scenario keeps the simulation's figure: $/h over the output tokens an hour at
its rate."""

from __future__ import annotations

from pathlib import Path

from infraplan.economics.cost import SECONDS_PER_MONTH
from infraplan.serving.lengths import expected_length
from infraplan.serving.traffic import mean_rate_per_s

CURVE_LABEL = "over the day's curve"  # what a month's per-token price is labelled


def month_output_tokens(scenario, base_dir: Path | None = None) -> float | None:
    """Output tokens a month of the scenario's diurnal curve asks for (None: not diurnal)."""
    traffic = scenario.traffic
    if traffic.arrival.kind != "diurnal":
        return None
    return (mean_rate_per_s(traffic, base_dir=base_dir) * expected_length(traffic.output)
            * SECONDS_PER_MONTH)


def curve_price(scenario, month_usd: float, base_dir: Path | None = None) -> dict | None:
    """A month's cost over the output tokens of a month of the scenario's diurnal curve,
    per million, with the two figures it divides (None: a constant rate)."""
    tokens = month_output_tokens(scenario, base_dir)
    if tokens is None:
        return None
    return {"usd_per_million_output_tokens": month_usd / tokens * 1e6,
            "month_usd": month_usd, "month_output_tokens": tokens}


def curve_usd_per_million_output(scenario, month_usd: float,
                                 base_dir: Path | None = None) -> float | None:
    """curve_price's $/M output tokens alone."""
    price = curve_price(scenario, month_usd, base_dir)
    return None if price is None else price["usd_per_million_output_tokens"]
