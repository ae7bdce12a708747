"""The request field types every /api endpoint shares: JSON numbers that are finite and not
booleans or strings (pydantic's lax mode would read true as 1 and "128" as 128), and the
strict base model of a request."""

from __future__ import annotations

import functools
import json
import math
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field


def json_number(value: Any, *, to_float: bool = False) -> Any:
    """A finite JSON number: pydantic's lax mode would read true as 1 and "128" as 128, and
    Python's JSON reader lets NaN, Infinity and 1e400 through. Whole floats (1e10) stay
    accepted for counts: JSON has one number type."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"must be a JSON number, got {_shown(value)}")
    if isinstance(value, float) or to_float:
        try:
            finite = math.isfinite(value)
        except OverflowError:  # an integer past a float's range
            finite = False
        if not finite:
            raise ValueError(f"must be a finite number, got {_shown(value)}")
    return value


def _shown(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else f"{text[:30]}... ({len(text):,} characters)"


Number = Annotated[float, BeforeValidator(functools.partial(json_number, to_float=True))]
Count = Annotated[int, BeforeValidator(json_number)]
TensorParallel = Annotated[Literal[1, 2, 4, 8], BeforeValidator(json_number)]


class In(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class ModelPick(In):
    """A request's model: a catalog name, or an uploaded config.json with a label."""

    model: str | None = Field(default=None, max_length=100,
                              description="catalog model name ('llama-3.1-8b'); or upload "
                                          "`config`")
    config: dict[str, Any] | None = Field(default=None, description="an uploaded "
                                          "config.json's content (parsed in memory)")
    name: str = Field(default="uploaded-model", max_length=100,
                      description="label of an uploaded config")
