"""Every command takes --json (with a stable schema name) and --quiet (the headline only);
progress bars show only on a terminal, after a second, and never with --json or --quiet."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from infraplan.cli import build_parser, main
from infraplan.report import progress as progress_module
from infraplan.report.progress import progress_bar

ROOT = Path(__file__).resolve().parents[2]


def _leaf_parsers(parser: argparse.ArgumentParser, path=()):
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
    for action in subs:
        for name, child in action.choices.items():
            yield from _leaf_parsers(child, (*path, name))


def test_every_command_has_json_and_quiet():
    for path, parser in _leaf_parsers(build_parser()):
        if path == ("ui",):  # a server, not a report
            continue
        flags = {s for a in parser._actions for s in a.option_strings}
        assert {"--json", "--quiet"} <= flags, path


@pytest.mark.parametrize("argv, schema, headline", [
    (["validate", "training", str(ROOT / "validation" / "training_dev.csv")],
     "infraplan.validate_training/1", "median |error|"),
    (["plan", "train", str(ROOT / "examples" / "article-1-finetune-7b.yaml")],
     "infraplan.plan_train/1", "best: 1 x h100-sxm5-80gb"),
    (["tco", "dgx-h100", "--rent", "3"], "infraplan.tco/1", "per GPU-hour owned"),
])
def test_json_schema_and_quiet_headline(capsys, argv, schema, headline):
    assert main([*argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["schema"] == schema
    assert main([*argv, "--quiet"]) == 0
    out = capsys.readouterr().out
    assert headline in out and out.count("\n") == 1


def test_json_output_is_strict_json(capsys):
    """NaN and infinities (a median over no predicted row) print as null, not as the NaN
    literal that strict JSON parsers (jq, JSON.parse) reject."""
    import numpy as np

    from infraplan.report.output import emit

    args = argparse.Namespace(json=True, quiet=False)
    assert emit(args, "x", {"median": float("nan"), "rows": [np.float64("inf"), 1.5]},
                lambda: "") == 0
    data = json.loads(capsys.readouterr().out, parse_constant=pytest.fail)
    assert data == {"schema": "infraplan.x/1", "median": None, "rows": [None, 1.5]}


def test_progress_only_on_a_terminal_and_after_the_delay(monkeypatch):
    with progress_bar("x") as tick:  # pytest's stderr is not a terminal
        assert tick is None
    with progress_bar("x", enabled=False) as tick:
        assert tick is None
    monkeypatch.setattr("sys.stderr.isatty", lambda: True, raising=False)
    monkeypatch.setattr(progress_module, "DELAY_S", 0.0)
    with progress_bar("working") as tick:
        assert tick is not None
        for i in range(3):
            tick(i + 1, 3)
