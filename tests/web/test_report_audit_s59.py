"""A first-time reader's audit of the HTML report: the reserved commitment and the two
on-demand costs reconciled beside the strategy table, the CLI's cost column in the plans
tables, chart bars that cannot be read as table ranks, one unit per latency column, and
figures printed the same in a chart, a card and the paragraph beside it."""

from __future__ import annotations

import re

import pytest

from tests.web.conftest import (EXAMPLES, example_document, items_of as _items,
                                section_of as _section)


@pytest.fixture(scope="module")
def finetune_doc():
    return example_document("article-1-finetune-7b.yaml")


def test_the_strategy_table_carries_the_commitment_and_the_reconciliation(spot_doc):
    """The reserved row's cost p50 ($21,535, '44% cheaper') used to stand with no word of
    the $589,124 one-year term, and Economics' $42,585 beside the table's $38,328 was
    reconciled nowhere near it."""
    from infraplan.report.html import render_sections

    section = _section(spot_doc, "Yield plan")
    (strategies,) = [t for t in section["tables"] if "pricing strategies" in t["title"]]
    rows = {r[0]: r for r in strategies["rows"]}
    assert rows["on-demand"][6] == "$38,328" and rows["reserved + spot burst"][6] == "$21,535"
    notes = strategies["notes"]
    assert notes[0] == (
        "Reserved + spot burst (taken as a 1-year price): reserved-1y bills a 1-year term: "
        "32 GPUs x $2.10 x 8,766.72 h = $589,124 committed; its cost p50 counts the 6,388 GPU-h "
        "of the reserved GPUs the median run holds (2.3 % of the term).")
    assert notes[1].startswith("Plan train's time to train, 9.2 d, is this work over a 90% "
                               "run goodput")
    assert _items(_section(spot_doc, "Economics"))["cost"] == "$42,585"
    assert notes[2] == (
        "The cost in Economics, $42,585, is plan train's over its 9.2 days to train at 90% "
        "run goodput (compute (on-demand): 14,194.9 GPU-h x $3.00/GPU-h (the scenario's price, "
        "per GPU used: whole instances are billed only for catalog offers)). This table bills "
        "compute alone, over runs drawn with this plan's own failures, preemptions and "
        "checkpoints: the on-demand median run lasts 8.3 d and costs $38,328.")
    # every note simulate train prints is on the page
    shown = " ".join([*notes, *section["paragraphs"]]).lower()
    assert spot_doc["run"]["notes"] and all(n.lower() in shown for n in spot_doc["run"]["notes"])
    # right under the table, before the goodput chart and the section's paragraphs
    html = render_sections(spot_doc)
    assert ('</table></div><p class="para table-note">Reserved + spot burst (taken as a 1-year '
            'price): reserved-1y bills a 1-year term: 32 GPUs x $2.10 x 8,766.72 h = $589,124 '
            'committed') in html


def test_the_plans_tables_have_the_clis_cost_column(finetune_doc, capsys):
    """`plan train` prints $1,150 / $1,231 / $1,270; the report's tables had no cost."""
    from infraplan.cli import main

    assert main(["plan", "train", str(EXAMPLES / "article-1-finetune-7b.yaml")]) == 0
    cli = capsys.readouterr().out
    best = _section(finetune_doc, "Scale")["tables"][0]
    assert best["title"] == "best plans"
    column = best["columns"].index("cost")
    assert best["columns"][column - 1] == "GPU-hours"
    assert [r[column] for r in best["rows"]] == ["$1,150", "$1,231", "$1,270"]
    for row in best["rows"]:  # the CLI's GPU-hours and cost, side by side
        assert re.search(rf"{re.escape(row[column - 1])}\s+{re.escape(row[column])}\s", cli)
    for t in _section(finetune_doc, "Pick platform")["tables"]:
        assert [r[t["columns"].index("cost")] for r in t["rows"]] == ["$1,150"], t["title"]


def test_step_breakdown_bars_are_labelled_by_the_tables_rank_or_as_an_accelerators_best():
    """'#4 2048 x a100-sxm4-80gb' was the best A100 plan, while #4 in the best plans table
    is an H100 plan."""
    doc = example_document("train-llama-3.1-70b.yaml")
    labels = doc["figures"]["step_breakdown"]["data"][0]["y"]
    assert labels == ["#1 2048 x h100-sxm5-80gb", "#2 2048 x h100-sxm5-80gb",
                      "#3 2048 x h100-sxm5-80gb",
                      "best a100-sxm4-80gb plan: 2048 x a100-sxm4-80gb"]
    best = _section(doc, "Scale")["tables"][0]
    assert best["rows"][3][0] == "h100-sxm5-80gb"
    for label in labels:  # a rank names the table's row of that rank
        if label.startswith("#"):
            rank, count, _, gpu = label[1:].split()
            assert best["rows"][int(rank) - 1][:2] == [gpu, count]


def test_training_report_figures_read_as_the_cards_and_paragraphs(finetune_doc):
    """'MTBF 50677.0 h' in a chart title beside '50,677 h'; '378 kWh' on a card beside
    '= 378.237 kWh' in its formula; '$1000' ticks beside '$1,118'; 'in 0.0 s'."""
    yield_plan = _items(_section(finetune_doc, "Yield plan"))
    figures = finetune_doc["figures"]
    assert yield_plan["job MTBF"] == "50,677 h"
    assert figures["goodput"]["layout"]["title"]["text"] == \
        "Goodput vs checkpoint interval (MTBF 50,677 h)"
    assert "1,000" in figures["goodput"]["layout"]["xaxis"]["ticktext"]
    economics = _section(finetune_doc, "Economics")
    cards = _items(economics)
    assert cards["energy"] == "378.237 kWh"
    assert cards["carbon (kg CO2e)"] == "129.917 kg CO2e (us-east-1)"
    [energy] = [p for p in economics["paragraphs"] if p.startswith("energy: ")]
    assert "= 378.237 kWh; x 343.48 g CO2e/kWh = 129.917 kg CO2e" in energy
    assert figures["cost"]["layout"]["yaxis"]["tickformat"] == ","
    assert figures["frontier_usd"]["layout"]["xaxis"]["tickprefix"] == "$"
    assert figures["frontier_usd"]["layout"]["xaxis"]["tickformat"] == ","
    assert figures["frontier_gpu_hours"]["layout"]["xaxis"]["tickformat"] == ","
    from infraplan.units import duration_text

    evaluated = _items(_section(finetune_doc, "Scale"))["plans evaluated"]
    seconds = finetune_doc["plan"]["search_seconds"]
    assert evaluated == f"21 of 995,328 candidates (6 fit) in {duration_text(seconds)}"
    assert not evaluated.endswith(" 0.0 s")


def test_latencies_sharing_a_column_share_a_unit():
    from infraplan.report.document import limit_ms, ms_column

    assert ms_column([0.0954, 6.8482, 9.3252, 10.2]) == ["0.095 s", "6.848 s", "9.325 s",
                                                         "10.200 s"]
    assert ms_column([6.8482, 9.3252, 10.2, None]) == ["6.8 s", "9.3 s", "10.2 s", "-"]
    assert ms_column([0.0874, 0.0717, 0.1489]) == ["87.4 ms", "71.7 ms", "148.9 ms"]
    assert ms_column([7.3997, 5.5684, 15.0, 30.6]) == ["7.4 s", "5.6 s", "15.0 s", "30.6 s"]
    assert (limit_ms(2.0), limit_ms(0.05), limit_ms(12.5)) == ("2,000 ms", "50 ms", "12.5 s")


def test_the_serving_reports_latency_columns_and_slos():
    """The load sweep's p99 end to end column mixed '9,325.2 ms' and '10.2 s'; the SLOs read
    '≤ 1,000.0 ms'."""
    doc = example_document("serve-llama8b-chat.yaml")
    assert _items(_section(doc, "Define workload"))["SLOs"] == \
        "p99 TTFT ≤ 1,000 ms, p99 TPOT ≤ 50 ms"
    sweep = _section(doc, "Load-test")["tables"][0]
    e2e = [r[sweep["columns"].index("p99 end to end")] for r in sweep["rows"]]
    assert e2e[:4] == ["6.5 s", "7.1 s", "7.8 s", "8.8 s"]  # 6,545.3 ms ... 8,812.3 ms
    for s in doc["sections"]:
        for t in s["tables"]:
            for n, column in enumerate(t["columns"]):
                units = {c.rsplit(" ", 1)[-1] for c in (r[n] for r in t["rows"])
                         if re.fullmatch(r"[\d,.]+ m?s", c)}
                assert len(units) <= 1, (t["title"], column, units)
    latency = next(t for t in _section(doc, "Load-test")["tables"] + [
        t for s in doc["sections"] for t in s["tables"]] if t["title"] == "latency")
    for row in latency["rows"]:  # one unit per quantity
        assert len({c.rsplit(" ", 1)[-1] for c in row[1:]}) == 1, row


def test_a_billed_checkpoint_unlike_the_one_written_is_pointed_out(finetune_doc):
    """The Yield plan wrote a 58.0 GB checkpoint (weights and 8-bit Adam states) while the
    cost billed 48 copies of the scenario's 14 GB (bf16 weights) and no line said so."""
    paragraphs = _section(finetune_doc, "Yield plan")["paragraphs"]
    assert ("The cost bills 14 GB a checkpoint (costs.checkpoint_gb), the Yield plan writes "
            "58.0 GB (the model and optimizer states a restart needs). Keep the scenario's "
            "figure if the kept copies hold less (weights only), else set "
            "costs.checkpoint_gb: 58.") in paragraphs


def test_the_per_million_price_shows_how_it_is_made():
    """'$5.38' an hour, '4,588' output tok/s and '$0.299' per million did not multiply out:
    the price is at the 5,006 tok/s served while requests arrive, which the page left out.
    The item now carries its basis, and the figures in it reproduce it."""
    doc = example_document("serve-llama8b-chat.yaml")
    econ = _items(_section(doc, "Economics"))
    text = econ["cost per million output tokens"]
    m = re.fullmatch(r"\$([\d.]+): \$([\d.]+)/h / \(([\d,]+) output tok/s while requests "
                     r"arrive x 3,600 s\) x 1,000,000", text)
    assert m, text
    price, hourly, rate = float(m[1]), float(m[2]), float(m[3].replace(",", ""))
    assert econ["compute cost per hour"] == f"${hourly:.2f}"
    assert price == pytest.approx(hourly / (rate * 3600) * 1e6, abs=0.001)


@pytest.mark.parametrize("example", ["article-1-finetune-7b.yaml",
                                     "article-3-serve-70b-100k-users.yaml"])
def test_the_grid_intensity_and_its_source_are_on_the_page(example, capsys):
    """`plan train` / `plan serve` print 'grid: us-east-1: 343.48 g/kWh (2025, estimate);
    source: ...' under the energy line; the report gave the carbon without it."""
    from infraplan.cli import main
    kind = "serve" if "serve" in example else "train"
    assert main(["plan", kind, str(EXAMPLES / example)]) == 0
    (grid,) = [line for line in capsys.readouterr().out.splitlines()
               if line.startswith("grid: ")]
    assert grid.startswith("grid: us-east-1: 343.48 g/kWh (2025, estimate); source: ")
    paragraphs = _section(example_document(example), "Economics")["paragraphs"]
    assert grid in paragraphs
