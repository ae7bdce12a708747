"""The source stays within the project's conventions: lines of at most 100 characters
(pyproject's ruff line-length) and no unused imports or undefined names (pyflakes)."""

from __future__ import annotations

import io
from pathlib import Path

from pyflakes.api import checkPath
from pyflakes.reporter import Reporter

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("src", "tests", "benchmarks")
MAX_LINE = 100


def _python_files() -> list[Path]:
    return sorted(p for folder in FOLDERS for p in (ROOT / folder).rglob("*.py"))


def test_the_tree_has_python_files():
    # the checks below would pass on an empty list
    assert len(_python_files()) > 100


def test_no_line_over_100_characters():
    long = [f"{p.relative_to(ROOT)}:{n}" for p in _python_files()
            for n, line in enumerate(p.read_text().splitlines(), 1) if len(line) > MAX_LINE]
    assert long == []


def test_pyflakes_reports_nothing():
    out = io.StringIO()
    warnings = sum(checkPath(str(p), Reporter(out, out)) for p in _python_files())
    assert (warnings, out.getvalue()) == (0, "")
