"""How plan train and simulate train write their figures: grouped digits, never exponents;
hours under a day; reasons in words."""

from __future__ import annotations

from infraplan.economics.cost import plan_cost
from infraplan.economics.energy import estimate_energy
from infraplan.training.plan_train import plan_training
from infraplan.workloads import TrainScenario


def test_large_figures_are_grouped_digits_not_exponents():
    """A 405B run printed '2.83521e+07 GPU-h' and '2.58004e+07 kWh'."""
    cost = plan_cost(28_352_146.4, 2.5, 86400 * 100)
    assert cost.items[0].formula.startswith("28,352,146 GPU-h x $2.50/GPU-h")
    energy = estimate_energy("h100", 16_384, 86400 * 100, utilization=1.0, pue=1.3,
                             g_co2e_per_kwh=400)
    assert energy.formula == ("(16384 x 700 W GPUs only) x 1 utilization x 2,400 h x PUE 1.3 = "
                              "35,782,656 kWh; x 400 g CO2e/kWh = 14,313,062 kg CO2e")
    small = plan_cost(33_009.6, 2.95, 86400)
    assert small.items[0].formula.startswith("33,009.6 GPU-h x $2.95/GPU-h")


def test_durations_under_a_day_read_in_hours():
    """The terminal and the HTML report: a 4.8-hour run read '0.2 days' in the report."""
    from infraplan.report.document import days
    from infraplan.units import run_length

    assert [run_length(s) for s in (86400 * 57.3, 86400 * 0.2, 1800)] == \
        ["57.3 d", "4.8 h", "30.0 min"]
    assert [days(s) for s in (86400 * 57.3, 86400 * 0.2, None)] == \
        ["57.3 days", "4.8 h", "-"]


def test_why_lost_names_full_recompute_of_part_of_the_layers_in_words():
    """It read 'recompute=partial full' (code 1 < c < 2: full on some layers, selective on
    the rest)."""
    result = plan_training(TrainScenario.model_validate({
        "model": "gemma-2-27b", "top": 1,
        "training": {"tokens": 3.0e11, "global_batch": 240, "seq_len": 8192},
        "hardware": {"gpus": ["h100"], "counts": [24]}}))
    lines = [r for r in result.rejected if r.startswith("recompute=")]
    assert any(r.startswith("recompute=full on part of the layers: ") for r in lines)
    assert not any("partial full" in r for r in result.rejected)


def test_the_plan_terms_are_explained_under_the_tables_and_only_those_used():
    """'PP=2x12', 'mb=8', 'SP' and 'TP-overlap' were printed in plan train's and validate's
    tables with no word of what they mean."""
    from infraplan.training.plan import ParallelPlan, plan_legend

    plain = ParallelPlan(tp=1, pp=1, dp=8)
    assert plan_legend([plain]).replace("\n  ", " ") == (
        "plan terms: ZeRO-1/2/3: optimizer states / + gradients / + weights sharded over DP; "
        "mb: sequences per micro-batch")
    lines = plan_legend([plain, ParallelPlan(tp=8, pp=2, vp=12, dp=4, sequence_parallel=True,
                                             tp_comm_overlap=True)])
    assert all(len(line) <= 100 for line in lines.splitlines())
    full = lines.replace("\n  ", " ")
    assert full.startswith("plan terms: PP=2x12: 2 pipeline stages of 12 model chunks each "
                           "(virtual stages, interleaved 1F1B); ZeRO")
    assert full.endswith("; SP: sequence parallel; TP-overlap: TP communication overlapped "
                         "with GEMMs")
    assert "EP-overlap" not in full and "ETP" not in full


def test_plan_train_and_validate_print_the_plan_terms(capsys):
    from infraplan.cli import main

    main(["plan", "train", "examples/train-llama-3.1-70b.yaml"])
    text = capsys.readouterr().out
    frontier = text.index("frontier:")
    assert text.index("plan terms: PP=") > frontier
    main(["validate", "training", "validation/training_dev.csv"])
    text = capsys.readouterr().out
    assert text.index("plan terms: PP=2x12: 2 pipeline stages of 12 model chunks") < \
        text.index("error = ")
