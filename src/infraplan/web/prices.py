"""The forms' price field: what a user pays per GPU-hour, as the scenario's `prices:`.

The field takes one number (USD per GPU-hour, for every accelerator chosen) or name=price
pairs ("h100=2.50, a100=1.60"; names resolve through the catalog, aliases too). Over the
API it may also be a JSON number or an object {name: price}. It becomes the scenario's
`prices:` in canonical names, so the library prices the plans; each refusal names the
request term (`prices`), which the page shows with the field's label. page script
(static/app.js, `pricesProblem`) words the same checks the same way for a link's value.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any

from pydantic import BeforeValidator

from infraplan.economics.cost import MAX_USD_PER_GPU_HOUR
from infraplan.errors import InputError, UnknownNameError
from infraplan.units import format_usd_rate

FORMS = "one number for every accelerator (2.50) or name=price pairs (h100=2.50, a100=1.60)"
# a decimal number as people write prices (no 'nan', 'inf', '1_000'); the page's the same
NUMBER = r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?"
MAX_CHARS = 500  # characters of the field, or pairs of an object
PAIR = re.compile(rf"\s*([^=\s][^=]*?)\s*=\s*({NUMBER})\s*")


def _loose(value: Any) -> Any:
    """A JSON number, text or an object of numbers; anything else (true, a list) refused."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str, dict)):
        raise ValueError(f"must be {FORMS}, in USD per GPU-hour")
    if isinstance(value, (str, dict)) and len(value) > MAX_CHARS:
        what = "characters" if isinstance(value, str) else "pairs"
        raise ValueError(f"has {len(value):,} {what}: at most {MAX_CHARS} (a price per "
                         "accelerator compared)")
    return value


PricesIn = Annotated[float | str | dict[str, Any] | None, BeforeValidator(_loose)]


def _price(item: str, text: Any) -> float:
    """A price of the field: a finite number above 0, at most the library's cap."""
    number = isinstance(text, (int, float)) and not isinstance(text, bool)
    price = float(text) if number or re.fullmatch(NUMBER, str(text)) else math.nan
    if math.isnan(price):  # 1e400 reads as inf: above the cap, as the page says
        raise InputError(f"prices: {item!r} is not a price", fix=f"give USD per GPU-hour, "
                         f"{FORMS}")
    if price <= 0 or price > MAX_USD_PER_GPU_HOUR:
        raise InputError(f"prices: {item!r}: a price is above $0 and at most "
                         f"${MAX_USD_PER_GPU_HOUR:,.0f} per GPU-hour",
                         fix="give the USD you pay per GPU-hour, e.g. 2.50")
    return price


def _items(value: float | str | dict[str, Any]) -> list[tuple[str | None, Any, str]]:
    """(name or None for every accelerator, price, the item as the user wrote it)."""
    if isinstance(value, dict):
        return [(k, v if isinstance(v, (int, float)) and not isinstance(v, bool) else math.nan,
                 f"{k}={v}") for k, v in value.items()]
    if not isinstance(value, str):
        return [(None, value, format_usd_rate(value))]
    text = value.strip()
    if re.fullmatch(NUMBER, text):
        return [(None, text, text)]
    items = []
    for part in (p for p in text.split(",") if p.strip()):
        m = PAIR.fullmatch(part)
        if not m:
            raise InputError(f"prices: {part.strip()!r} is not a price or a name=price pair",
                             fix=f"give USD per GPU-hour, {FORMS}")
        items.append((m[1], m[2], part.strip()))
    return items


def form_prices(value: float | str | dict[str, Any] | None,
                gpus: list[str]) -> dict[str, float]:
    """The scenario's `prices:` ({canonical name: USD per GPU-hour}) for the field's value;
    `gpus` are the canonical names of the accelerators the request chose."""
    from infraplan.catalog import load_catalog

    if value is None or (isinstance(value, str) and not value.strip()):
        return {}
    accelerators = load_catalog().accelerators
    prices: dict[str, float] = {}
    written: dict[str, str] = {}
    for key, text, item in _items(value):
        price = _price(item, text)
        if key is None:
            return {g: price for g in gpus}
        try:
            name = accelerators.get(key).name
        except UnknownNameError as exc:
            raise InputError(f"prices: {item!r}: {exc.message}",
                             fix="name an accelerator of the list (or its alias)") from None
        if name not in gpus:
            chosen = ", ".join(gpus)
            raise InputError(f"prices: {item!r}: {name} is not among the accelerators chosen "
                             f"({chosen})", fix=f"pick {name} in the accelerators too, or "
                                                "drop its price")
        if name in prices:
            raise InputError(f"prices: {written[name]!r} and {item!r} price the same "
                             f"accelerator ({name})", fix="keep one of them")
        prices[name], written[name] = price, item
    return prices
