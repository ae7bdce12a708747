"""`infraplan validate` after audit s62: the exit status the help promises when the model
cannot predict a row, --quiet errors that carry their reasons, suffixed numbers read as SI
with a note, row messages that all say how to fix them, each kind's own help, and file
suggestions only for names that are really close."""

from __future__ import annotations

import pytest

from infraplan.cli import main
from tests.cli.test_validate_audit_s59 import GPT, SERVE_HEADER, TRAIN_HEADER


def _train_row(rid, model=str(GPT), gpu="a100-sxm4-80gb", num_gpus="32", dp="32",
               recompute="full", global_batch="512", seq_len="2048", tokens="",
               metric="step_s", value="3.528"):
    return (f"{rid},s,{model},{gpu},{num_gpus},1,1,{dp},,,0,{recompute},false,,"
            f"{global_batch},{seq_len},fp16,{tokens},{metric},{value},\n")


def _serve_row(rid, arrival="offline", rate=""):
    return (f"{rid},s,llama-3.1-8b,h100-sxm5-80gb,1,1,fp8,fp8,128,128,40,{arrival},{rate},,"
            "output_tok_s,28312,TensorRT-LLM,\n")


def _write(tmp_path, header, *rows, name="rows.csv"):
    path = tmp_path / name
    path.write_text(header + "".join(rows))
    return path


def _nofit(rid="nofit"):  # 405B on 8 A100s without recompute: no plan fits in memory
    return _train_row(rid, model="llama-3.1-405b", num_gpus="8", dp="8", recompute="none")


def _run(capsys, *argv):
    status = main(["validate", *argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


# 1. rows the model cannot predict are results: exit 0, as the help says, even all of them


def test_a_file_whose_every_row_is_beyond_the_model_exits_0(tmp_path, capsys):
    path = _write(tmp_path, TRAIN_HEADER, _nofit())
    status, out, err = _run(capsys, "training", str(path), "-q")
    assert (status, out, err) == (
        0, "rows: 1, no row predicted, failed: 1 (0 bad input, 1 beyond the model)\n", "")
    status, out, err = _run(capsys, "training", str(path))
    assert status == 0 and err == ""
    assert "failed (model error) rows.csv:2: row 'nofit': no plan fits in memory" in out


# 2. --quiet prints no row's reason: the error carries them


def test_quiet_bad_input_names_each_row_and_its_reason(tmp_path, capsys):
    path = _write(tmp_path, TRAIN_HEADER, _train_row("badgpu", gpu="h1000"), _nofit())
    status, out, err = _run(capsys, "training", str(path), "-q")
    assert status == 2
    assert out == "rows: 2, no row predicted, failed: 2 (1 bad input, 1 beyond the model)\n"
    assert err == (
        f"error: 1 row of {path} has bad input (line 2):\n"
        "  rows.csv:2: row 'badgpu': unknown accelerator or node type 'h1000'; did you mean "
        "'h100-sxm5-80gb', 'v100-sxm2-32gb', 'h800-sxm5-80gb'? To fix: run 'infraplan catalog "
        "gpus' or 'infraplan catalog systems' to list them\n"
        "To fix: correct each row as its reason says\n")


def test_quiet_bad_input_lists_the_first_five_reasons_and_counts_the_rest(tmp_path, capsys):
    rows = [_train_row(f"r{i}", seq_len=f"-{i}") for i in range(1, 8)]
    status, _, err = _run(capsys, "training", str(_write(tmp_path, TRAIN_HEADER, *rows)),
                          "--quiet")
    lines = err.splitlines()
    assert status == 2 and len(lines) == 8
    assert lines[0].endswith("7 rows of " f"{tmp_path / 'rows.csv'} have bad input "
                             "(line 2, 3, 4, 5, 6, 7, 8):")
    assert lines[5] == ("  rows.csv:6: row 'r5': seq_len must be >= 1, got -5. To fix: set the "
                        "seq_len cell to a whole number >= 1")
    assert lines[6:] == ["  ... and 2 more (run without --quiet to see every row)",
                         "To fix: correct each row as its reason says"]


def test_without_quiet_the_error_points_at_the_reasons_where_they_are(tmp_path, capsys):
    path = _write(tmp_path, TRAIN_HEADER, _train_row("badgpu", gpu="h1000"))
    assert _run(capsys, "training", str(path))[2] == (
        f"error: 1 row of {path} has bad input (line 2). To fix: see each row's reason above\n")
    assert _run(capsys, "training", str(path), "--json")[2] == (
        f"error: 1 row of {path} has bad input (line 2). To fix: see each row's reason in "
        "the JSON's \"failed\" list\n")


# 3. a suffix reads as SI (published tables write '2T' tokens), and the row's notes say so


@pytest.mark.parametrize("cells, plain, note", [
    ({"global_batch": "0.512k"}, {"global_batch": "512"}, "global_batch '0.512k' read as "
     "512 (a suffix is SI; write 524.288 if the source means binary)"),
    ({"metric": "gpu_hours", "tokens": "2T", "value": "18432"},
     {"metric": "gpu_hours", "tokens": "2000000000000", "value": "18432"},
     "tokens '2T' read as 2000000000000 (a suffix is SI)"),
    ({"metric": "gpu_hours", "tokens": "1.5 B", "value": "18432"},
     {"metric": "gpu_hours", "tokens": "1500000000", "value": "18432"},
     "tokens '1.5 B' read as 1500000000 (a suffix is SI)"),
])
def test_a_suffixed_number_reads_as_si_and_the_row_says_so(tmp_path, capsys, cells, plain,
                                                           note):
    """'1k' was read as 1,000 without a word, where a source may mean 1,024."""
    import json

    rows = {}
    for rid, row in (("suf", cells), ("plain", plain)):
        path = _write(tmp_path, TRAIN_HEADER, _train_row(rid, **row), name=f"{rid}.csv")
        status, out, _ = _run(capsys, "training", str(path), "--json")
        assert status == 0
        [rows[rid]] = json.loads(out)["rows"]
    assert rows["suf"]["predicted"] == rows["plain"]["predicted"]
    assert note in rows["suf"]["notes"] and not any("suffix" in n for n in rows["plain"]["notes"])


def test_plain_and_exponent_cells_still_read(tmp_path, capsys):
    path = _write(tmp_path, TRAIN_HEADER, _train_row("e", global_batch="5.12e2",
                                                     value="3.528e0"))
    status, out, _ = _run(capsys, "training", str(path), "-q")
    assert status == 0 and out.startswith("rows: 1, median |error| ")


# 5. every row message says how to fix it, in one format: column 'value'


@pytest.mark.parametrize("cells, reason", [
    ({"seq_len": "-2048"}, "seq_len must be >= 1, got -2048. To fix: set the seq_len cell to a "
                           "whole number >= 1"),
    ({"global_batch": "5l2"}, "global_batch '5l2' is not a number. To fix: set the global_batch "
                              "cell to a whole number >= 1"),
    ({"value": "abc"}, "value 'abc' is not a number. To fix: set the value cell to a plain "
                       "number > 0 (such as 3.528 or 2.0e12)"),
    ({"metric": "step_time"}, "metric 'step_time' is not one of step_s, gpu_hours, "
     "tokens_per_s, tokens_per_s_per_gpu; did you mean 'step_s'? To fix: set the metric cell "
     "to one of step_s, gpu_hours, tokens_per_s, tokens_per_s_per_gpu"),
    ({"metric": "gpu_hours"}, "a gpu_hours row needs tokens and the tokens cell is empty. To "
     "fix: give the run's total training tokens in the tokens cell (a plain number such as "
     "3e11)"),
])
def test_training_row_messages_carry_their_fix(tmp_path, capsys, cells, reason):
    path = _write(tmp_path, TRAIN_HEADER, _train_row("bad", **cells))
    status, out, _ = _run(capsys, "training", str(path))
    assert status == 2 and f"rows.csv:2: row 'bad': {reason}\n" in out


def test_a_poisson_row_without_a_rate_says_how_to_fix_it(tmp_path, capsys):
    path = _write(tmp_path, SERVE_HEADER, _serve_row("p", arrival="poisson"))
    status, out, _ = _run(capsys, "serving", str(path))
    assert status == 2
    assert ("rows.csv:2: row 'p': a poisson row needs rate_per_s > 0 and the rate_per_s cell "
            "is empty. To fix: give the published request rate (requests per second) in the "
            "rate_per_s cell, or set arrival to offline\n") in out


# 4. each kind's help in its own words; the group's help names the exit codes


def _help(capsys, *argv) -> str:
    with pytest.raises(SystemExit) as stop:
        main([*argv, "--help"])
    assert stop.value.code == 0
    return " ".join(capsys.readouterr().out.split())


def test_each_validate_help_names_its_own_model_limits(capsys):
    serving = _help(capsys, "validate", "serving")
    assert "no plan fits in memory" not in serving
    assert ("also when the model cannot predict some or all rows (the replica's memory holds "
            "no KV cache for the requests, or the engine refuses them)") in serving
    training = _help(capsys, "validate", "training")
    assert "also when the model cannot predict some or all rows (no plan fits in memory)" \
        in training
    assert "--quiet prints the summary line, and the bad rows' reasons on stderr" in training
    group = _help(capsys, "validate")
    assert ("Exit status 2 when a row has bad input or the file cannot be read, else 0; "
            "'infraplan validate training --help' (or serving) says more.") in group


# 6. a missing file suggests only names that are really close


def test_a_missing_file_suggests_only_close_names(tmp_path, capsys):
    for name in ("t_extra.csv", "training_dev.csv", "training_dev.yaml"):
        (tmp_path / name).write_text(TRAIN_HEADER)
    status, _, err = _run(capsys, "training", str(tmp_path / "nonexist.csv"))
    assert status == 2 and "does not exist. To fix:" in err and "did you mean" not in err
    status, _, err = _run(capsys, "training", str(tmp_path / "trainig_dev.csv"))
    assert f"does not exist; did you mean '{tmp_path / 'training_dev.csv'}'? To fix:" in err


# 7. the summary names the worst row and the bias, in text and JSON


def test_the_summary_names_the_worst_row_and_the_mean_signed_error(tmp_path, capsys):
    import json

    # one plan predicts 2.691 s for each: errors -23.7 %, +7.6 %, -55.2 %; mean -23.8 %
    path = _write(tmp_path, TRAIN_HEADER, _train_row("a", value="3.528"),
                  _train_row("b", value="2.5"), _train_row("c", value="6"))
    status, out, _ = _run(capsys, "training", str(path), "-q")
    assert (status, out) == (0, "rows: 3, median |error| 23.7%, max |error| 55.2% (row 'c'), "
                                "mean error -23.8% (bias), failed: 0\n")
    assert main(["validate", "training", str(path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    predicted = data["rows"][0]["predicted"]
    assert data["max_abs_error_id"] == "c"
    assert data["mean_error_pct"] == pytest.approx(
        100 * (predicted / 3.528 + predicted / 2.5 + predicted / 6 - 3) / 3, rel=1e-12)
    # times and rates: their signs mean opposites, so no bias is averaged over both
    path = _write(tmp_path, TRAIN_HEADER, _train_row("t", value="3.528"),
                  _train_row("r", metric="tokens_per_s", value="300000"))
    status, out, _ = _run(capsys, "training", str(path), "-q")
    assert "(bias)" not in out and out.endswith("), failed: 0\n")
    main(["validate", "training", str(path), "--json"])
    assert json.loads(capsys.readouterr().out)["mean_error_pct"] is None
