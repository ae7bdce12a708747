"""Static batches and their limits as a first-time user meets them (audit s61): a batch
larger than max_num_seqs crashed with an IndexError in the step tables, batch_size without
static batching was ignored silently, and a preempted prompt recomputed alone without
chunked prefill indexed past the step table."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from infraplan.cli import main
from infraplan.errors import InputError
from infraplan.serving.deployment import Deployment, resolve
from infraplan.serving.simulate import simulate
from infraplan.serving.traffic import Requests

ROOT = Path(__file__).resolve().parents[2]
CHAT = (ROOT / "examples" / "serve-llama8b-chat.yaml").read_text()


def _scenario(tmp_path, deployment: str) -> str:
    text = CHAT.replace("num_requests: 3000", "num_requests: 200")
    text = "\n".join(f"deployment: {deployment}" if line.startswith("deployment:") else line
                     for line in text.splitlines())
    path = tmp_path / "serve.yaml"
    path.write_text(text + "\n")
    return str(path)


@pytest.mark.parametrize("engine, batch, seqs", [("vllm", 8, 4), ("tensorrt-llm", 16, 2)])
def test_a_static_batch_larger_than_max_num_seqs_is_refused(tmp_path, capsys, engine, batch,
                                                            seqs):
    path = _scenario(tmp_path, f"{{gpu: h100, weight_dtype: fp8, engine: {engine}, "
                               f"batching: static, batch_size: {batch}, "
                               f"max_num_seqs: {seqs}}}")
    assert main(["simulate", "serve", path, "-q"]) == 2
    err = capsys.readouterr().err
    assert f"deployment.batch_size {batch} is more than max_num_seqs {seqs}" in err
    assert f"lower batch_size to {seqs}, or leave max_num_seqs out" in err
    assert "Traceback" not in err


def test_batch_size_without_static_batching_is_refused():
    with pytest.raises(InputError) as exc:
        Deployment.model_validate(dict(model="llama-3.1-8b", gpu="h100", batch_size=8))
    assert "deployment.batch_size applies only to batching: static" in exc.value.message
    assert "to fix: add batching: static, or leave batch_size out" in str(exc.value)


def test_a_static_batch_up_to_max_num_seqs_runs():
    dep = Deployment(model="llama-3.1-8b", gpu="h100", batching="static", batch_size=4,
                     max_num_seqs=4)
    res = simulate(dep, Requests(np.zeros(8), np.full(8, 100), np.full(8, 10)))
    assert np.isfinite(res.finish_s).all() and resolve(dep).max_num_seqs == 4


def test_a_recomputed_prompt_longer_than_the_step_table_runs():
    """Without chunked prefill a preempted sequence is recomputed alone, prompt and output
    so far in one step, which may exceed max_num_batched_tokens: its linear part carries on
    the table's last slope (an IndexError before)."""
    dep = Deployment(model="llama-3.1-8b", gpu="h100", chunked_prefill=False,
                     max_num_batched_tokens=2048, max_num_seqs=64, memory_fraction=0.35)
    step = resolve(dep).step
    table = step.linear_s
    assert step.linear(2048) == table[2048]
    assert step.linear(3048) == pytest.approx(table[2048] + 1000 * (table[2048] - table[2047]))
    res = simulate(dep, Requests(np.zeros(400), np.full(400, 2000), np.full(400, 3000)))
    assert res.preemptions.sum() > 0 and np.isfinite(res.finish_s).all()
