"""Report audit, session 62: the training report's goodput curve, a serving plan's longer
run, the frontier's title."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.web.conftest import EXAMPLES, example_document


@pytest.fixture(scope="module")
def llama_doc():
    return example_document("train-llama-3.1-70b.yaml")


def test_the_goodput_curve_starts_at_the_upload(llama_doc):
    """It starts at the shortest interval a checkpoint can take (its upload, since one
    starts only once the last is durable); it began at the 2.6 s the asynchronous copy
    blocks, under the text's own 1.32 min floor, with hovers 'every 0.0 min'."""
    k = llama_doc["checkpoints"]
    assert k["asynchronous"] and k["blocking_s"] < k["write_s"] / 10
    curve, used = llama_doc["figures"]["goodput"]["data"][:2]
    assert curve["x"][0] == pytest.approx(k["write_s"] / 60)
    assert curve["x"][0] == pytest.approx(used["x"][0])  # the interval used is the upload
    assert "%{x:.3g} min" in curve["hovertemplate"]


def test_a_plans_longer_run_says_why_it_holds_more_requests_than_asked(tmp_path):
    """The serving page's Scale said 'requests simulated 1,231' beside Define workload's
    'requests 1,000', with no word of the planner lengthening its window."""
    from infraplan.report.document import build_document
    from tests.web.conftest import items_of, section_of

    raw = yaml.safe_load((EXAMPLES / "serve-llama8b-chat.yaml").read_text())
    raw["traffic"]["num_requests"] = 1000
    del raw["deployment"]  # the page shows the plan's choice, simulated as the plan ran it
    path = tmp_path / "chat.yaml"
    path.write_text(yaml.safe_dump(raw))
    simulated = items_of(section_of(build_document(path), "Scale"))["requests simulated"]
    count = int(simulated.split(" ")[0].replace(",", ""))
    assert count > 1000
    assert simulated == (f"{count:,} (the scenario asks 1,000; the plan runs each candidate "
                         "until its queue reaches the steady state at its load)")
    raw["traffic"]["num_requests"] = 6000  # long enough: nothing to explain
    path.write_text(yaml.safe_dump(raw))
    simulated = items_of(section_of(build_document(path), "Scale"))["requests simulated"]
    assert simulated == "6,000"


def test_the_frontier_table_is_titled_as_plan_train_titles_it(llama_doc, capsys):
    """plan train printed 'time vs cost frontier' where the report titled the same three
    plans 'time vs GPU-hours frontier'."""
    from infraplan.cli import main
    from tests.web.conftest import section_of

    assert main(["plan", "train", str(EXAMPLES / "train-llama-3.1-70b.yaml")]) == 0
    assert "time vs cost frontier:" in capsys.readouterr().out.splitlines()
    titles = [t["title"] for t in section_of(llama_doc, "Pick platform")["tables"]]
    assert "time vs cost frontier" in titles


def test_report_help_says_what_json_quiet_and_output_do(tmp_path, capsys):
    """`report --help` said --quiet prints 'the answer's headline' (it prints the path),
    --json nothing of writing the HTML too, -o nothing of refusing a file not its own."""
    import json as _json

    from infraplan.cli import main

    with pytest.raises(SystemExit):
        main(["report", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "never over an existing file that is not an infraplan report" in text
    assert "--json print the written file's path and size in bytes as JSON" in text
    assert "--quiet, -q print only the written file's path;" in text
    scenario = str(EXAMPLES / "memory-llama-3.1-8b-qlora.yaml")
    out = tmp_path / "r.html"
    assert main(["report", scenario, "-o", str(out), "--json"]) == 0
    answer = _json.loads(capsys.readouterr().out)
    assert answer == {"schema": "infraplan.report/1", "output": str(out),
                      "bytes": out.stat().st_size}
    assert main(["report", scenario, "-o", str(out), "-q"]) == 0
    assert capsys.readouterr().out == f"{out}\n"
    mine = tmp_path / "notes.html"
    mine.write_text("my notes")
    assert main(["report", scenario, "-o", str(mine)]) == 2
    assert mine.read_text() == "my notes"


def test_the_report_says_how_to_bill_the_checkpoints_its_yield_plan_writes(llama_doc):
    """Its cost was one compute line while the scenario names a checkpoint tier and the Yield
    plan writes 988 GB checkpoints to it (test_unbilled.py has the note itself)."""
    from infraplan.economics.cost import CostInputs, unbilled_note
    from tests.web.conftest import section_of

    text = json.dumps(section_of(llama_doc, "Yield plan"))
    assert ("The Yield plan writes 988 GB a checkpoint to fsx-lustre-p2-125, which the cost "
            "does not bill: set costs.checkpoint_gb: 988 and costs.checkpoint_tier: "
            "fsx-lustre-p2-125 to bill one kept copy (costs.checkpoints_kept for more).") in text
    assert unbilled_note(CostInputs()) in section_of(llama_doc, "Economics")["paragraphs"]
