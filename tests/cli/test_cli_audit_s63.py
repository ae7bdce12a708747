"""A user's audit of simulate train, tco and catalog (s63): output that cannot be written,
figures that rounded to nothing, JSON keys that said something else."""

from __future__ import annotations

import errno
import io
import json
import sys
from pathlib import Path

import pytest

from infraplan.cli import main


class _FullDisk(io.StringIO):
    def write(self, text):
        raise OSError(errno.ENOSPC, "No space left on device")


def test_a_full_disk_is_an_error_not_a_traceback(monkeypatch, capsys):
    """`infraplan catalog gpus --json > /dev/full` raised OSError out of emit (exit 1 and
    a traceback); it is now the message and exit 2."""
    monkeypatch.setattr(sys, "stdout", _FullDisk())
    assert main(["catalog", "gpus", "--json"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: cannot write the answer to standard output: "
                          "No space left on device;")


def test_a_closed_stdout_is_an_error_not_a_traceback(monkeypatch, capsys):
    """`infraplan catalog gpus >&-` leaves sys.stdout None: the table's isatty() raised
    AttributeError."""
    monkeypatch.setattr(sys, "stdout", None)
    assert main(["catalog", "gpus"]) == 2
    assert "standard output is closed" in capsys.readouterr().err


def _scenario(tmp_path, text: str):
    path = tmp_path / "s.yaml"
    path.write_text("model: gpt2\ntraining: {tokens: 1.0e6, global_batch: 8, seq_len: 1024}\n"
                    + text)
    return str(path)


def test_a_short_runs_time_and_cost_are_shown_not_rounded_away(tmp_path, capsys):
    """1M tokens of GPT-2 on one H100 is 2.84 s of work and $0.00212 on demand: the text
    printed 'work 0.0 min', '$0' and 'plan train's time to train, 0.0 d'."""
    path = _scenario(tmp_path, "hardware: {gpus: [h100], counts: [1]}\n"
                               "run: {trials: 20}\n")
    assert main(["simulate", "train", path, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["work_s"] == pytest.approx(2.84, abs=0.005)
    cost = data["strategies"]["on_demand"]["cost_usd"]["p50"]
    assert cost == pytest.approx(2.84 * 2.69 / 3600, rel=0.01)  # $2.69/GPU-h, no failure
    assert main(["simulate", "train", path]) == 0
    out = capsys.readouterr().out
    assert "work 2.84 s of failure-free compute" in out
    assert f"${cost:.3g}" == "$0.00212" and "$0.00212" in out
    assert "plan train's time to train, 3.16 s, is" in out  # 2.84 s / 90 % run goodput
    assert "work 0.0 min" not in out and " $0 " not in out
    assert main(["simulate", "train", path, "-q"]) == 0
    assert capsys.readouterr().out.startswith("on-demand: 2.84 s, $0.00212; spot: 2.84 s, $")


@pytest.mark.parametrize("rate, every", [(2, "0.5"), (0.4, "2.5"), (0.6, "1.67"),
                                         (2e-5, "50,000")])
def test_a_fleets_rate_says_how_often_it_fails(tmp_path, capsys, rate, every):
    """failures_per_gpu_hour: 2 printed 'one every 0 GPU-hours' (and 0.6 'one every 2')."""
    path = _scenario(tmp_path, "hardware: {gpus: [h100], counts: [1]}\n"
                               f"run: {{trials: 20, failures_per_gpu_hour: {rate}}}\n")
    assert main(["simulate", "train", path]) == 0
    assert f"(one every {every} GPU-hours)" in capsys.readouterr().out


def test_the_json_has_no_checkpoint_interval_the_runs_did_not_use(capsys):
    """checkpoint.interval_s was Daly's (287 s) while the strategies used 362, 287 and
    322 s: each strategy's own interval_s is the one its runs used."""
    article_4 = Path(__file__).parents[2] / "examples" / "article-4-2b-spot.yaml"
    assert main(["simulate", "train", str(article_4), "--json", "--seed", "0"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert "interval_s" not in data["checkpoint"]
    used = {k: round(s["interval_s"], 1) for k, s in data["strategies"].items()}
    assert len(set(used.values())) == 3  # the scan picks each strategy's own


@pytest.mark.parametrize("hardware, message", [
    ("hardware: {gpus: h100, counts: 64}",
     "hardware.gpus must be a list (got 'h100'); to fix: write it in brackets, gpus: [h100]; "
     "hardware.counts must be a list (got 64); to fix: write it in brackets, counts: [64]"),
    ("hardware: {gpus: {h100: 1}, counts: [8]}", "hardware.gpus must be a list, not a mapping "
                                                 "of keys"),
    ("hardware: {gpus: [h100], counts: [8]}\nrun: [1, 2]",
     "run must be a mapping of keys (checkpoint_storage, asynchronous, failure_detection_s, "
     "failures_per_gpu_hour, ...), not a list"),
])
def test_a_list_or_a_mapping_in_the_wrong_place_is_named_in_words(tmp_path, capsys,
                                                                   hardware, message):
    """pydantic's 'must be a valid tuple' and 'valid dictionary or instance of RunSpec'."""
    assert main(["plan", "train", _scenario(tmp_path, hardware + "\n")]) == 2
    err = capsys.readouterr().err
    assert message in err and "valid tuple" not in err and "RunSpec" not in err
