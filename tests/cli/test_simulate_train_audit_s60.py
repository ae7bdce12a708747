"""A user's audit of simulate train (s60): the reserved commitment in the table and the
headline, one format for short intervals, prices as billed, notes and errors as plan train
prints them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infraplan.cli import main

ARTICLE_4 = Path(__file__).parents[2] / "examples" / "article-4-2b-spot.yaml"
ARTICLE_2 = ARTICLE_4.with_name("article-2-train-70b-32xh100.yaml")


def _run(capsys, path, *flags: str) -> str:
    assert main(["simulate", "train", str(path), *flags]) == 0
    return capsys.readouterr().out


@pytest.fixture(scope="module")
def article_4():
    from infraplan.scenario_files import load_scenario
    from infraplan.training.simulate_run import simulate_training_run
    from infraplan.workloads import TrainScenario

    return simulate_training_run(load_scenario(ARTICLE_4, TrainScenario))


def test_the_reserved_strategy_shows_its_whole_term(article_4, capsys):
    """'Reserved + spot burst: 44% cheaper than on-demand (mean)' hid the $589,124 one-year
    commitment of its 32 GPUs (32 x $2.10 x 8,766.72 h): the table's cost p50 $21,535
    counts only the 2.3% of the term the run uses. Now a column holds the commitment and
    the headline says what the saving leaves out and what the strategy costs with it."""
    t = article_4.term
    assert t.committed_usd == pytest.approx(32 * 2.10 * 8766.72)
    d = article_4.strategies["reserved_plus_spot"]
    # with the term: the run's cost, less its own reserved hours (inside the term), plus
    # the whole term: 21,541 - 32 x 2.10 x 199.6 h + 589,124
    held = 32 * 2.10 * d.samples.wall_s / 3600
    assert t.with_term_usd.mean == pytest.approx(d.cost_usd.mean - held.mean() + 589123.58,
                                                 abs=1)
    assert round(t.with_term_usd.mean) == 597243
    out = _run(capsys, ARTICLE_4)
    assert "reserved term, committed" in out
    assert "$589,124 (1 y, 32 GPUs)" in out
    assert ("reserved + spot burst: 44% cheaper than on-demand (mean), +0.1% wall time, "
            "excluding the $589,124 commitment, which pays only if the 32 reserved GPUs are "
            "used for the rest of the 1-year term; counting it, $597,243 (mean), 15.6 x "
            "on-demand's $38,338") in out
    data = json.loads(_run(capsys, ARTICLE_4, "--json"))["commitment"]
    assert data["committed_usd"] == pytest.approx(589123.58, abs=0.01)
    assert data["term_years"] == 1 and data["reserved_gpus"] == 32
    assert round(data["cost_with_term_usd"]["mean"]) == 597243


def test_short_intervals_and_mtbfs_print_in_seconds(tmp_path, capsys):
    """With run.failures_per_gpu_hour: 1 the 64-GPU job's MTBF is 3,600 / 64 = 56.25 s and
    its checkpoints go every 1.85 s (the upload), which printed 'job MTBF 0.02 h',
    'checkpoint every 0.0 min (scan)' and '0.0 min: 8.08%'."""
    path = tmp_path / "s.yaml"
    path.write_text(ARTICLE_4.read_text().replace(
        "  trials: 1000", "  trials: 20\n  failures_per_gpu_hour: 1"))
    out = _run(capsys, path)
    assert "job MTBF 56.2 s;" in out
    assert "on-demand              1.85 s (scan)" in out
    assert "  1.85 s: 8.0" in out
    assert " 0.0 min" not in out and "0.02 h" not in out


def test_an_unused_price_is_noted_as_plan_train_notes_it(tmp_path, capsys):
    """prices: {a100: 3.00} beside gpus: [h100] was silently ignored by simulate train,
    while plan train printed that it is unused and how to key it."""
    path = tmp_path / "s.yaml"
    path.write_text(ARTICLE_4.read_text().replace("prices: {h100: 3.00}",
                                                  "prices: {h100: 3.00, a100: 3.00}")
                    .replace("  trials: 1000", "  trials: 20"))
    note = ("note: prices: a100 ($3.00/GPU-h, the catalog's a100-sxm4-80gb) is unused: it is "
            "not among the accelerators compared (h100-sxm5-80gb). To fix: add a100 to "
            "hardware.gpus to compare it, or key the price by a compared one (prices: "
            "{h100-sxm5-80gb: 3})")
    assert main(["plan", "train", str(path)]) == 0
    assert note in capsys.readouterr().out
    assert note in _run(capsys, path)


def test_prices_print_as_billed(tmp_path, capsys):
    """Article 2 bills $6.155 a GPU-hour and printed 'on-demand $6.16'; article 4's spot
    price is $3.00 x $1.25 / $2.95 = $1.271186, printed '$1.27' as '$3.00 less 58%' (which
    is $1.26): now the price as used (6 significant digits) and the discount to 0.1%."""
    path = tmp_path / "a2.yaml"
    path.write_text(ARTICLE_2.read_text() + "run: {trials: 20, strategies: [on_demand]}\n")
    assert "  on-demand $6.155: the scenario's" in _run(capsys, path)
    path = tmp_path / "a4.yaml"
    path.write_text(ARTICLE_4.read_text().replace("  trials: 1000", "  trials: 20"))
    out = _run(capsys, path)
    assert ("  spot $1.27119: the scenario's on-demand $3.00 less 57.6%, the discount of the "
            "catalog's cheapest spot offer (nebius, $1.25) off its on-demand $2.95") in out


@pytest.mark.parametrize("command", [["simulate", "train"], ["plan", "train"], ["memory"],
                                     ["validate", "training"], ["tco"]])
def test_json_help_names_the_real_schema(command, capsys):
    """--help said \"print JSON (schema 'infraplan.<command>/1')\", a placeholder."""
    with pytest.raises(SystemExit):
        main([*command, "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert f"print JSON (schema 'infraplan.{'_'.join(command)}/1')" in help_text


def test_the_default_failure_rate_says_how_to_set_yours(tmp_path, capsys):
    """'...; run.failures_per_gpu_hour sets your fleet's' read cut off."""
    path = tmp_path / "s.yaml"
    path.write_text(ARTICLE_4.read_text().replace("  trials: 1000", "  trials: 20"))
    assert ("failure rate: Llama 3 405B: 419 interruptions / (54 days x 16,384 GPUs) = "
            "1.97e-05 per GPU-hour; set run.failures_per_gpu_hour to your fleet's rate\n"
            ) in _run(capsys, path)


@pytest.mark.parametrize("change, message", [
    ("gpus: 32", "s.yaml: run.reserved.gpus = 100 exceeds the plan's 64 GPUs. To fix: "),
    ("usd_per_gpu_hour: 2.10", "s.yaml: run.reserved.usd_per_gpu_hour: the reserved price "
                               "$3.50 is not below on-demand $3.00"),
    ("advisor_band: \"15-20%\"", "s.yaml: run.spot: the spot price $3.50 per GPU-hour "
                                 "(run.spot.usd_per_gpu_hour) is not below on-demand $3.00")])
def test_errors_against_the_plan_name_the_file(tmp_path, capsys, change, message):
    """Errors raised once the file was read lacked the 'FILE.yaml:' prefix every other
    error has: 'run.reserved.gpus = 100 exceeds the plan's 64 GPUs'."""
    new = {"gpus: 32": "gpus: 100", "usd_per_gpu_hour: 2.10": "usd_per_gpu_hour: 3.50",
           "advisor_band: \"15-20%\"": "usd_per_gpu_hour: 3.50"}[change]
    path = tmp_path / "s.yaml"
    path.write_text(ARTICLE_4.read_text().replace(change, new)
                    .replace("  trials: 1000", "  trials: 20"))
    assert main(["simulate", "train", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("error: " + message), captured.err
    assert captured.err.count("s.yaml:") == 1


def test_goodput_p10_stands_beside_the_median(article_4):
    """The median trial of article 4 has no failure, so 'goodput p50 99.996%' was all the
    table said of goodput; p10 (1 trial in 10 has less) now stands beside it."""
    from infraplan.report.run import strategy_columns, strategy_rows

    columns = strategy_columns(article_4)
    assert columns[4:6] == ["goodput p50", "goodput p10"]
    rows = {r[0]: r for r in strategy_rows(article_4)}
    assert rows["on-demand"][4:6] == ["99.996%", "99.884%"]
    assert rows["spot"][4:6] == ["99.995%", "99.086%"]


def test_a_monthly_percentage_is_answered_with_the_fraction(tmp_path, capsys):
    """monthly_interrupted_fraction: 15 (meant as 15%) read 'must be < 1 (got 15)'."""
    path = tmp_path / "s.yaml"
    path.write_text(ARTICLE_4.read_text().replace('advisor_band: "15-20%"',
                                                  "monthly_interrupted_fraction: 15"))
    assert main(["simulate", "train", str(path)]) == 2
    assert capsys.readouterr().err == (
        "error: s.yaml: run.spot.monthly_interrupted_fraction is a fraction of the instances "
        "interrupted in a month, not a percentage (got 15); to fix: write 0.15 for 15% (a "
        "fraction below 1)\n")


def test_few_trials_are_flagged_and_quiet_uses_the_tables_words(tmp_path, capsys):
    """At run.trials: 1 p90 equals p50 with no word of warning; -q labelled the strategies
    'on_demand' and 'reserved_plus_spot', not as the table does."""
    path = tmp_path / "s.yaml"
    path.write_text(ARTICLE_4.read_text().replace("  trials: 1000", "  trials: 1"))
    out = _run(capsys, path)
    assert ("1 trial per strategy (too few to trust the tails: p10 and p90 need 10 trials "
            "beyond them each, and equal p50 at 1 trial; set run.trials to 100 or more), "
            "seed 0;") in out
    quiet = _run(capsys, path, "-q")
    assert quiet.startswith("on-demand: 8.3 d, $") and "; spot: " in quiet
    assert "; reserved + spot burst: 8.3 d, $" in quiet and "_" not in quiet
    path.write_text(ARTICLE_4.read_text().replace("  trials: 1000", "  trials: 100"))
    assert "100 trials per strategy, seed 0;" in _run(capsys, path)
