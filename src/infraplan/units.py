"""Units: SI constants and the parsing of human quantities such as "80 GiB" or "3.35 TB/s".

Inside infraplan every quantity is in SI base units (bytes, seconds, FLOP, FLOP/s, bytes/s,
watts, USD). Decimal prefixes (k, M, G, T, P = 10**3n) and binary prefixes (Ki, Mi, Gi, Ti,
Pi = 2**10n) are never mixed up: "80 GB" is 80e9 bytes and "80 GiB" is 80 * 2**30 bytes.
Conversions happen here, once, at the edges (catalog files, CLI flags, reports).
"""

from __future__ import annotations

import math

import re

from infraplan.errors import InputError

KILO, MEGA, GIGA, TERA, PETA = 1e3, 1e6, 1e9, 1e12, 1e15
KiB, MiB, GiB, TiB, PiB = 2**10, 2**20, 2**30, 2**40, 2**50
BITS_PER_BYTE = 8

_DECIMAL = {"": 1.0, "k": KILO, "K": KILO, "M": MEGA, "G": GIGA, "T": TERA, "P": PETA}
_BINARY = {"Ki": KiB, "Mi": MiB, "Gi": GiB, "Ti": TiB, "Pi": PiB}

# base unit -> (dimension, factor to the SI base of that dimension)
_BASE_UNITS: dict[str, tuple[str, float]] = {
    "B": ("bytes", 1.0),
    "b": ("bytes", 1.0 / BITS_PER_BYTE),  # bits
    "B/s": ("bytes_per_s", 1.0),
    "b/s": ("bytes_per_s", 1.0 / BITS_PER_BYTE),  # "400 Gb/s" network links
    "bps": ("bytes_per_s", 1.0 / BITS_PER_BYTE),
    "FLOP/s": ("flops", 1.0),
    "FLOPS": ("flops", 1.0),
    "OP/s": ("flops", 1.0),  # integer tensor ops (TOPS) share the FLOP/s dimension
    "OPS": ("flops", 1.0),
    "W": ("watts", 1.0),
    "s": ("seconds", 1.0),
    "ms": ("seconds", 1e-3),
    "us": ("seconds", 1e-6),
    "ns": ("seconds", 1e-9),
}

_QUANTITY = re.compile(
    r"^\s*(?P<num>[-+]?\d[\d_,]*(?:\.\d+)?(?:[eE][-+]?\d+)?)\s*"
    r"(?P<prefix>Ki|Mi|Gi|Ti|Pi|k|K|M|G|T|P)?(?P<unit>[A-Za-z/]+)?\s*$"
)


def parse_quantity(text: str | int | float, dimension: str, *, field: str = "value") -> float:
    """Parse "80 GiB", "3.35 TB/s", "400 Gb/s", "989.4 TFLOP/s", "700 W", "2 us" into SI.

    A bare number is taken as already being in SI base units. The unit must belong to
    `dimension` (bytes, bytes_per_s, flops, watts, seconds), otherwise an InputError names
    the field and the units it accepts.
    """
    if isinstance(text, bool):
        raise InputError(f"{field}: expected a quantity in {dimension}, got {text!r}")
    if isinstance(text, (int, float)):
        return float(text)
    match = _QUANTITY.match(str(text))
    if not match:
        raise InputError(
            f"{field}: cannot read {text!r} as a quantity in {dimension}",
            fix=f"write a number and a unit, for example {_example(dimension)!r}",
        )
    number = float(match["num"].replace("_", "").replace(",", ""))
    prefix, unit = match["prefix"] or "", match["unit"] or ""
    if not unit:
        if prefix:  # "80 G" without a unit is ambiguous
            raise InputError(f"{field}: {text!r} has a prefix but no unit",
                             fix=f"write for example {_example(dimension)!r}")
        return number
    if unit not in _BASE_UNITS:
        # "80GB" parses as prefix G + unit B; "80 Gbps" as G + bps. Anything else is unknown.
        raise InputError(
            f"{field}: unknown unit {prefix + unit!r} in {text!r}",
            fix=f"write for example {_example(dimension)!r}",
        )
    unit_dimension, factor = _BASE_UNITS[unit]
    if unit_dimension != dimension:
        raise InputError(
            f"{field}: {text!r} is in {unit_dimension}, expected {dimension}",
            fix=f"write for example {_example(dimension)!r}",
        )
    scale = _BINARY[prefix] if prefix in _BINARY else _DECIMAL[prefix]
    return number * scale * factor


def _example(dimension: str) -> str:
    return {
        "bytes": "80 GiB",
        "bytes_per_s": "3.35 TB/s",
        "flops": "989 TFLOP/s",
        "watts": "700 W",
        "seconds": "2 us",
    }.get(dimension, "1")


def format_bytes(n_bytes: float, *, binary: bool = True) -> str:
    """Human form of a byte count: GiB by default (what nvidia-smi and PyTorch report)."""
    if binary:
        units = [(PiB, "PiB"), (TiB, "TiB"), (GiB, "GiB"), (MiB, "MiB"), (KiB, "KiB")]
    else:
        units = [(PETA, "PB"), (TERA, "TB"), (GIGA, "GB"), (MEGA, "MB"), (KILO, "kB")]
    for scale, name in units:
        if abs(n_bytes) >= scale:
            return f"{n_bytes / scale:,.2f} {name}"
    return f"{n_bytes:,.0f} B"


def format_figure(x: float) -> str:
    """A figure of a formula to 6 significant digits, grouped, never in exponent form:
    33,009.6 and 28,352,146 (':,.6g' printed 2.83521e+07 GPU-h)."""
    return f"{x:,.0f}" if abs(x) >= 1e5 else f"{x:,.6g}"


def format_usd_rate(x: float) -> str:
    """A price per unit (per GPU-hour, GB-month, kWh) as money: to the cent, with more
    digits only where the price has them, up to 6 significant so that a formula line
    reproduces: 2.10 (':.6g' printed 2.1), 1.79, 3.93333, 0.023, 0.0004; from 1,000 to the
    cent (12,345.68)."""
    if not math.isfinite(x):
        return f"{x}"
    if abs(x) >= 1000:
        return f"{x:,.2f}"
    text = f"{x:.6g}"
    if "e" in text:  # under 1e-4: 6 significant digits in fixed point
        text = f"{x:.{5 - math.floor(math.log10(abs(x)))}f}".rstrip("0")
    whole, _, cents = text.partition(".")
    return f"{whole}.{cents.ljust(2, '0')}"


def three_figures(x: float) -> str:
    """`x` to 3 significant digits, grouped, never in exponent form: 50,000 (':.3g' printed
    5e+04), 12,300, 0.146."""
    if not math.isfinite(x) or abs(x) < 1000:
        return f"{x:.3g}"
    return f"{float(f'{x:.3g}'):,.0f}"


def sig3(x: float) -> str:
    """3 significant figures, trailing zeros kept (10.0, 4.78, 0.0145); 100 and up whole."""
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:#.3g}"


def duration_text(seconds: float) -> str:
    """Seconds to 3 significant figures in a unit that suits them: '14.5 ms', '1.85 s',
    '10.0 min', '3.09 h'."""
    if seconds >= 3600:
        return f"{sig3(seconds / 3600)} h"
    if seconds >= 60:
        return f"{sig3(seconds / 60)} min"
    if seconds >= 1 or seconds == 0:
        return f"{sig3(seconds)} s"
    if seconds >= 1e-3:
        return f"{sig3(seconds * 1e3)} ms"
    return f"{sig3(seconds * 1e6)} us"


def run_length(seconds: float, day: str = " d") -> str:
    """A run's length in days, or under a day in hours ('0.2 d' said little), under an
    hour in minutes, under a minute as duration_text: '57.3 d', '4.8 h', '30.0 min', '2.84 s'
    ('0.0 min' hid a test run's whole answer). `day`: the day unit (' days' in reports)."""
    if seconds < 60:
        return duration_text(seconds)
    if seconds >= 86400:
        return f"{seconds / 86400:,.1f}{day}"
    return f"{seconds / 3600:,.1f} h" if seconds >= 3600 else f"{seconds / 60:,.1f} min"


def format_flops(n: float) -> str:
    """A FLOP count in the largest unit under it, to 2 decimals: 16.08 GFLOP, 2.03 TFLOP
    (a 1T-parameter model's forward pass printed as 2,029.32 GFLOP)."""
    for scale, name in [(1e18, "EFLOP"), (1e15, "PFLOP"), (1e12, "TFLOP"), (1e9, "GFLOP"),
                        (1e6, "MFLOP")]:
        if abs(n) >= scale:
            return f"{n / scale:,.2f} {name}"
    return f"{n:,.0f} FLOP"


def format_count(n: float) -> str:
    """Parameter counts the way papers write them: 70.55B, 12.9M."""
    for scale, name in [(1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")]:
        if abs(n) >= scale:
            return f"{n / scale:,.2f}{name}"
    return f"{n:,.0f}"
