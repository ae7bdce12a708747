"""How the API answers: the response of a plan, simulation or memory check, and the library's
text rewritten in a request's terms.

The library's messages name scenario paths (`hardware.min_count`) and CLI commands a web
request does not have; each endpoint is wrapped by `in_request_terms`, which rewrites its
InputErrors and its report's notes into the fields of its request (`min_count`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from infraplan.errors import InputError


# The library's messages name scenario paths and knobs a request does not have; each rule
# (pattern, replacement) rewrites them in the request's terms.
_CATALOG_TERMS = ((r"run 'infraplan catalog (\w+)' to list \w+", r"pick one from /api/catalog/\1"),
                  (r"'infraplan catalog (\w+)'", r"/api/catalog/\1"))
# a price's source in the form's terms: the user's price is not a scenario's
_PRICE_TERMS = ((r"the scenario(?:'|&#x27;)s price", "your price (prices)"),
                # the library's 'prices: {h100-sxm5-80gb: 2.50}' is the field's h100...=2.50
                (r"(?:in the scenario: )?prices: \{([\w.-]+): ([\d.]+|\.\.\.)\}",
                 r"prices (\1=\2)"))

def _scenario_file(command: str) -> tuple[tuple[str, str], ...]:
    """The keys the notes ask for that no request has (the node type, the network, the
    grid): the page says where they are set, a scenario file for the CLI's `command`."""
    where = f"in a scenario file for `infraplan {command}`"
    return ((r" \(set energy\.region for the grid you run on\)",
             f" (this page uses the world average; for the grid you run on, set energy.region "
             f"{where})"),
            (r"; set hardware\.system or hardware\.network to plan others",
             f"; this page plans these; to plan others, set hardware.system or "
             f"hardware.network {where}"),
            (r"(a faster scale-out network \(hardware\.network, .*?\(hardware\.system\) "
             r"would shorten it)", rf"\1 (set {where})"),
            # the form has prices but no costs: or energy: (economics.cost, energy)
            (r"; set (those keys|that key) to add (them|it)\b",
             rf"; this page bills compute alone: set \1 {where} to add \2"),
            (r"set energy\.host_w_per_node to add it", f"set energy.host_w_per_node {where} "
             "to add it"),
            (r"(set costs\.checkpoint_gb: [\d.,]+ and costs\.checkpoint_tier: [\w.-]+) to bill",
             rf"\1 {where} to bill"))


TRAIN_TERMS = (*_PRICE_TERMS, *_scenario_file("plan train"),
                # the Yield plan's sources: a file inside the package, a command of the CLI
                (r"\(run-goodput in catalog/data/calibration\.yaml\)",
                 "(run-goodput in the catalog calibration data)"),
                (r"`infraplan simulate train` draws the run",
                 "`infraplan simulate train` (the CLI; this page does not simulate a training "
                 "run) draws the run"),
                (r"or set counts\b", "or lower count_step"),
                # the scenario's checks name the request, then its field: the field first
                # (the page marks the field a message opens with), its fix as a sentence
                (r"^request: ((?:hardware|training|constraints)\.\w+) (.*?); to fix: ",
                 r"\1 \2. To fix: "),
                (r"^request: ((?:hardware|training|constraints)\.\w+) ", r"\1 "),
                (r"\(hardware\.max_count, or hardware\.counts\)", "(max_count)"),
                # the form has no list of counts: min_count..max_count in steps of count_step
                (r"\(hardware\.counts(, or count_step)?\)", "(min_count, max_count or "
                                                          "count_step)"))
SERVE_TERMS = (*_PRICE_TERMS, *_scenario_file("plan serve"),
    (r"\btraffic\.arrival\.(rate_per_s|cv)\b", r"traffic.\1"),
    (r"\btraffic\.(input|output)\.(mean|max)\b", r"traffic.\1_\2_tokens"),
    (r"\btraffic\.(input|output)\.sigma\b", r"traffic.\1_sigma"),
    (r"\(traffic\.input / traffic\.output\)",
     "(traffic.input_mean_tokens / traffic.output_mean_tokens)"),
    # the web form has no min length: only a mean above its max can be refused
    (r"(traffic\.(input|output)_mean_tokens \S+ is above max \(\S+\): .*to fix: )raise "
     r"max, or set mean within min\.\.max",
     r"\1raise traffic.\2_max_tokens, or lower traffic.\2_mean_tokens"),
    (r"raise tp \(now (\d+)\) or pp \(now \d+\)", r"raise tp (now \1)"),  # no pp here
    (r"(raise memory_fraction|lower block_size) \(now [^)]*\), or ", ""),  # the engine's
    (r"lower the batch limits \(max_num_seqs or a static batch_size: now ([\d,]+); "
     r"max_num_batched_tokens: now ([\d,]+)\)",
     r"pick an engine with lower batch limits (now \1 sequences, \2 batched tokens)"))

def in_request_terms(request: type[BaseModel], sections: str = "", *rules: tuple[str, str]):
    """An endpoint's InputErrors, and the notes of the report it answers with, in its
    request's terms: a scenario path in one of `sections` (`hardware.min_count`) becomes
    the request field that sets it (`min_count`). The library's JSON (`result`) keeps its
    own terms, as `--json` prints them."""
    path = re.compile(rf"\b(?:{sections})\.(\w+)\b" if sections else r"(?!)")

    def field(m: re.Match) -> str:
        return m[1] if m[1] in request.model_fields else m[0]

    def translate(text: str) -> str:
        for pattern, new in (*rules, *_CATALOG_TERMS):
            text = re.sub(pattern, new, text)
        return path.sub(field, text)

    def decorate(endpoint: Callable) -> Callable:
        @functools.wraps(endpoint)
        def answer(*args, **kwargs):
            try:
                response = endpoint(*args, **kwargs)
            except InputError as exc:
                exc.args = (translate(str(exc)),)
                raise
            if isinstance(response, PlanResponse):
                response.document = _each_text(response.document, translate)
                response.html = translate(response.html)
            return response
        return answer
    return decorate


def _each_text(value, change: Callable[[str], str]):
    """`value` with `change` applied to every string inside its dicts and lists."""
    if isinstance(value, str):
        return change(value)
    if isinstance(value, dict):
        return {k: _each_text(v, change) for k, v in value.items()}
    if isinstance(value, list):
        return [_each_text(v, change) for v in value]
    return value


class PlanResponse(BaseModel):
    """The library's JSON (as `--json` prints it; a serving simulation's per-event
    timeline left out), the report document and its HTML."""

    result: dict[str, Any]
    document: dict[str, Any]
    html: str


def respond(result: dict, doc: dict) -> PlanResponse:
    from infraplan.report.figures import json_safe
    from infraplan.report.html import render_sections

    return PlanResponse(result=json_safe(result), document=doc, html=render_sections(doc))
