"""A user's audit of the report's training run (s60): the strategy table says what the
CLI says of the reserved commitment, the Yield plan names the intervals simulated, and
the expected interruptions are over the time the simulation draws."""

from __future__ import annotations

import pytest

from tests.web.conftest import EXAMPLES, items_of as _items, section_of as _section


def test_the_strategy_table_holds_the_reserved_term(spot_doc):
    """The report's table showed the reserved row's $21,535 with no column for the $589,124
    one-year term it commits to, and its '44% cheaper' paragraph left the term out."""
    section = _section(spot_doc, "Yield plan")
    (strategies,) = [t for t in section["tables"] if "pricing strategies" in t["title"]]
    assert strategies["columns"][-1] == "reserved term, committed"
    assert [r[-1] for r in strategies["rows"]] == ["-", "-", "$589,124 (1 y, 32 GPUs)"]
    assert ("reserved + spot burst: 44% cheaper than on-demand (mean), +0.1% wall time, "
            "excluding the $589,124 commitment, which pays only if the 32 reserved GPUs are "
            "used for the rest of the 1-year term; counting it, $597,243 (mean), 15.6 x "
            "on-demand's $38,338") in section["paragraphs"]


def test_the_yield_plan_names_the_intervals_simulated(spot_doc):
    """The Yield plan said 'checkpoint interval used 4.78 min: Daly's' while the strategy
    table beside it drew on-demand at 6.0 min (the scan's best): now the card names each
    strategy's interval, in the table's format, and the first-order plan's apart."""
    section = _section(spot_doc, "Yield plan")
    (strategies,) = [t for t in section["tables"] if "pricing strategies" in t["title"]]
    assert [r[1] for r in strategies["rows"]] == ["6.03 min (scan)", "4.78 min (scan)",
                                                  "5.37 min (scan)"]
    assert _items(section)["checkpoint interval used"] == (
        "simulated (the scan's least mean wall time): on-demand 6.03 min, spot 4.78 min, "
        "reserved + spot burst 5.37 min; first-order plan: 4.78 min: Daly's")


def test_expected_interruptions_agree_with_simulate_train(capsys):
    """Llama 3.1 70B on 2,048 H100s: the Yield plan expected 12.9 interruptions, its time
    to train (the 11.9-day work over plan train's 90% fleet goodput, 13.3 days) over the
    89,081 s job MTBF, while simulate train's runs average 11.7. Now: the 1,032,240 s of
    failure-free work over (1 - the 0.83% modelled loss) / MTBF = 11.7."""
    import json

    from infraplan.cli import main
    from infraplan.report.document import build_document

    path = EXAMPLES / "train-llama-3.1-70b.yaml"
    doc = build_document(path)
    k = doc["checkpoints"]
    assert k["expected_interruptions"] == pytest.approx(
        1032240.3 / (1 - k["waste_fraction"]) / k["mtbf_s"], rel=1e-6)
    assert round(k["expected_interruptions"], 1) == 11.7
    assert _items(_section(doc, "Yield plan"))["expected interruptions over the run"] == (
        "11.7 over 12.0 days: the failure-free work plus the 0.83% modelled loss, at one per "
        "job MTBF")
    assert main(["simulate", "train", str(path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["work_s"] == pytest.approx(1032240.3, abs=0.1)
    mean = data["strategies"]["on_demand"]["interruptions"]["mean"]
    assert mean == pytest.approx(k["expected_interruptions"], rel=0.02)
