"""Shared fixtures. Tests that need torch or transformers skip cleanly when they are absent
only if INFRAPLAN_ALLOW_SKIP=1; `make test` installs both, so there they always run."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from hypothesis import settings

# Property tests draw the same examples on every run, so `make test` (and CI) passes or
# fails on the code alone; INFRAPLAN_HYPOTHESIS_EXPLORE=1 draws fresh ones to hunt for
# counterexamples (a find becomes an @example of its test)
settings.register_profile("repeatable", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile("explore" if os.environ.get("INFRAPLAN_HYPOTHESIS_EXPLORE") == "1"
                      else "repeatable")


def require(module: str):
    """Import an optional test dependency; fail (not skip) unless skipping is allowed."""
    if os.environ.get("INFRAPLAN_ALLOW_SKIP") == "1":
        return pytest.importorskip(module)
    import importlib

    return importlib.import_module(module)


README = Path(__file__).parents[1] / "README.md"


def folded_text(path: Path = README) -> str:
    """A document's text with every run of whitespace folded to one space, so that a quote
    matches however the lines are wrapped."""
    return " ".join(path.read_text(encoding="utf-8").split())


def assert_readme_quotes(pattern: str, report) -> None:
    """The README quotes a validation summary where `pattern` matches (groups: the median,
    then optionally the max |error| in percent, whitespace folded); hold them to `report`,
    so that a refit cannot leave the quoted figures stale."""
    quoted = re.search(pattern, folded_text())
    assert quoted, f"README no longer matches {pattern!r}"
    measured = (report.median_abs_error_pct, report.max_abs_error_pct)
    assert [float(q) for q in quoted.groups()] == \
        [round(m, 1) for m in measured[:len(quoted.groups())]]


def assert_meets_thresholds(report, *, rows: int, median_pct: float, max_pct: float) -> None:
    """An issue's acceptance on a development set: every row predicted, the median and max
    absolute error within the thresholds."""
    assert not report.failed
    assert len(report.rows) == rows
    assert report.median_abs_error_pct <= median_pct
    assert report.max_abs_error_pct <= max_pct
