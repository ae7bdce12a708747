"""`infraplan validate` as a first-time user meets it (audit s59): impossible rows refused at
once, rows located by file and line, bad input apart from the model's limits in the exit
status and the JSON, visible notes for what a prediction assumes."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from infraplan.cli import main
from infraplan.serving.validate import validate_serving
from infraplan.training.validate import validate_training

ROOT = Path(__file__).resolve().parents[2]
GPT = ROOT / "validation" / "models" / "megatron-gpt-1.7b.json"
TRAIN_HEADER = ("id,source,model,gpu,num_gpus,tp,pp,dp,cp,ep,zero,recompute,"
                "sequence_parallel,micro_batch,global_batch,seq_len,precision,tokens,metric,"
                "value,derivation\n")
SERVE_HEADER = ("id,source,model,gpu,num_gpus,tp,weight_dtype,kv_dtype,input_len,output_len,"
                "num_requests,arrival,rate_per_s,batch,metric,value,engine,derivation\n")


def _train_row(rid, num_gpus="32", tp="1", pp="1", dp="32", cp="", recompute="full",
               seq_len="2048", metric="step_s", value="3.528", model=str(GPT), tokens=""):
    return (f"{rid},s,{model},a100-sxm4-80gb,{num_gpus},{tp},{pp},{dp},{cp},,0,{recompute},"
            f"false,,512,{seq_len},fp16,{tokens},{metric},{value},\n")


def _serve_row(rid, model="llama-3.1-8b", inp="128", out="128", arrival="offline", rate="",
               batch="", engine="TensorRT-LLM", metric="output_tok_s", value="28312"):
    return (f"{rid},s,{model},h100-sxm5-80gb,1,1,fp8,fp8,{inp},{out},40,{arrival},{rate},"
            f"{batch},{metric},{value},{engine},\n")


def _write(tmp_path, header, *rows, name="rows.csv"):
    path = tmp_path / name
    path.write_text(header + "".join(rows))
    return path


def _json(capsys, *argv):
    status = main(["validate", *argv, "--json"])
    return status, json.loads(capsys.readouterr().out)


def test_impossible_plans_are_refused_at_once_with_the_arithmetic(tmp_path):
    """A billion GPUs ran the search for minutes and blocked every other row."""
    path = _write(tmp_path, TRAIN_HEADER,
                  _train_row("huge", num_gpus="1e9", tp="", pp="", dp=""),
                  _train_row("dp", num_gpus="1024", dp="1024"),
                  _train_row("mism", num_gpus="64", cp="1"),
                  _train_row("free", num_gpus="65536", cp="1", dp=""),
                  _train_row("good"))
    start = time.monotonic()
    report = validate_training(path)
    assert time.monotonic() - start < 30
    reasons = {r.id: r.error for r in report.failed}
    assert reasons["huge"].startswith("rows.csv:2: row 'huge': num_gpus=1,000,000,000 is "
                                      "above the 131,072 accelerators")
    assert "dp=1,024 is more than global_batch=512" in reasons["dp"]
    assert "tp*pp*cp*dp must equal num_gpus (1*1*1*32 = 32 != 64)" in reasons["mism"]
    assert "is at most 512 x 1 x 1 x 1 = 512" in reasons["free"]
    assert [r.id for r in report.predicted_rows] == ["good"]


def test_bad_input_exits_2_after_every_row_and_the_json_says_which_kind(tmp_path, capsys):
    path = _write(tmp_path, TRAIN_HEADER, _train_row("good"),
                  _train_row("typo", model="llama-3.1-70"),
                  _train_row("abc", value="abc"),
                  _train_row("nofit", model="llama-3.1-405b", num_gpus="8", dp="8",
                             recompute="none"))
    assert main(["validate", "training", str(path)]) == 2
    captured = capsys.readouterr()
    assert "good " in captured.out and "2 bad input, 1 beyond the model" in captured.out
    assert "2 rows of" in captured.err and "line 3, 4" in captured.err
    status, data = _json(capsys, "training", str(path))
    assert status == 2
    assert [(f["id"], f["line"], f["kind"]) for f in data["failed"]] == [
        ("typo", 3, "input"), ("abc", 4, "input"), ("nofit", 5, "model")]
    assert data["failed"][0]["reason"].startswith(
        "rows.csv:3: row 'typo': unknown model 'llama-3.1-70'; did you mean 'llama-3.1-70b'")
    # a row the model cannot fit is the model's limit: the status stays 0
    path = _write(tmp_path, TRAIN_HEADER, _train_row("good"),
                  _train_row("nofit", model="llama-3.1-405b", num_gpus="8", dp="8",
                             recompute="none"))
    assert main(["validate", "training", str(path), "--quiet"]) == 0


def test_enumerations_name_the_value_and_the_close_match(tmp_path):
    path = _write(tmp_path, TRAIN_HEADER, _train_row("rec", recompute="sellective"))
    (failed,) = validate_training(path).failed
    assert failed.error.startswith("rows.csv:2: row 'rec': recompute 'sellective' is not "
                                   "one of none, selective, full; did you mean 'selective'?")
    path = _write(tmp_path, SERVE_HEADER, _serve_row("arr", arrival="possion", rate="5"))
    (failed,) = validate_serving(path).failed
    assert "arrival 'possion' is not one of offline, static_batch, poisson; did you mean " \
           "'poisson'?" in failed.error


def test_the_other_kinds_csv_names_the_right_command(capsys):
    assert main(["validate", "serving", str(ROOT / "validation" / "training_dev.csv")]) == 2
    err = capsys.readouterr().err
    assert "header is the training CSV schema" in err and "did you mean" not in err
    assert "run infraplan validate training" in err


def test_training_past_the_positions_is_predicted_with_a_note(tmp_path, capsys):
    path = _write(tmp_path, TRAIN_HEADER, _train_row("long", seq_len="8192"))
    status, data = _json(capsys, "training", str(path))
    assert status == 0 and data["rows"][0]["predicted"] > 0
    assert data["rows"][0]["notes"] == [
        "seq_len 8192 exceeds the model's max_position_embeddings 2048"]
    assert main(["validate", "training", str(path)]) == 0
    assert "note rows.csv:2: row 'long': seq_len 8192 exceeds" in capsys.readouterr().out


def test_serving_notes_stand_in_engines_context_and_ignored_cells(tmp_path, capsys):
    path = _write(tmp_path, SERVE_HEADER, _serve_row("typo", engine="TensorRT-LMM"),
                  _serve_row("l7", model="llama-7b", inp="4000", out="200"),
                  _serve_row("rate", rate="5"))
    status, data = _json(capsys, "serving", str(path))
    assert status == 0 and not data["failed"]
    notes = {r["id"]: r["notes"] for r in data["rows"]}
    assert notes["typo"] == ["engine 'TensorRT-LMM' is not in the catalog: vllm's defaults "
                             "stand in for it; did you mean 'tensorrt_llm'?"]
    assert notes["l7"][0].startswith("input_len + output_len = 4,200 exceeds the model's "
                                     "max_position_embeddings 2,048")
    assert notes["rate"] == ["rate_per_s 5 is ignored: arrival offline has no request rate "
                             "(only poisson rows use it)"]
    assert data["stand_in_engines"] == [{"id": "typo", "line": 2, "engine": "TensorRT-LMM",
                                         "did_you_mean": "tensorrt_llm"}]
    assert main(["validate", "serving", str(path), "--quiet"]) == 0
    assert ("1 predicted with a stand-in engine for 'TensorRT-LMM' (did you mean "
            "'tensorrt_llm'?)") in capsys.readouterr().out


def test_the_error_sign_is_defined_per_kind_of_metric(tmp_path, capsys):
    status, data = _json(capsys, "training", str(ROOT / "validation" / "training_dev.csv"))
    assert data["file"].endswith("training_dev.csv")
    assert data["error_definition"].startswith(
        "error = (predicted - published) / published; negative: predicted faster (less time) "
        "than published (step_s")
    path = _write(tmp_path, SERVE_HEADER, _serve_row("t"))
    main(["validate", "serving", str(path)])
    assert ("error = (predicted - published) / published; negative: predicted lower (slower) "
            "than published (output_tok_s)") in capsys.readouterr().out


def test_figures_use_grouped_digits_and_a_bad_published_value_is_no_nan(tmp_path, capsys):
    from infraplan.report.validation import figure

    assert [figure(v) for v in (27302.6, 8424.7, 2.6907, 0.05545, float("nan"))] == [
        "27,303", "8,425", "2.691", "0.05545", "-"]
    path = _write(tmp_path, TRAIN_HEADER, _train_row("good"), _train_row("bad", value="nan"))
    assert main(["validate", "training", str(path)]) == 2
    out = capsys.readouterr().out
    assert "nan" not in out.split("\n\n")[0] and "e+0" not in out
    assert "rows.csv:3: row 'bad': value must be a finite number > 0, got 'nan'" in out


def test_file_level_messages_say_what_to_do(tmp_path, capsys):
    path = _write(tmp_path, TRAIN_HEADER.replace(",zero", ""), "")
    assert main(["validate", "training", str(path)]) == 2
    assert "missing column: zero." in capsys.readouterr().err
    assert main(["validate", "training", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "is a directory" in err and "To fix: give the path of a training CSV" in err


def test_help_states_the_exit_status(capsys):
    with pytest.raises(SystemExit):
        main(["validate", "training", "--help"])
    assert "exit status is 2 when any row has bad input" in \
        " ".join(capsys.readouterr().out.split())
