"""Predict published training measurements (validation/README.md, "training CSV").

Each row fixes the model, the accelerator, the GPU count, the batch and sequence, and
whatever parallel knobs it publishes; the planner chooses the knobs left empty (and the
virtual pipeline stages, which the schema has no column for): the fastest plan that fits.
"""

from __future__ import annotations

from pathlib import Path

from infraplan.catalog import load_catalog
from infraplan.errors import InputError
from infraplan.models import load_model
from infraplan.physics.memory.training import RECOMPUTE, recompute_code
from infraplan.training.evaluate import TrainingJob
from infraplan.training.memory import check_precision
from infraplan.training.search import search
from infraplan.training.space import Knobs
from infraplan.validation import (RowResult, ValidationReport, row_flag, row_float,
                                  row_int, row_metric, row_word, validate_file)

COLUMNS = ("id", "source", "model", "gpu", "num_gpus", "tp", "pp", "dp", "cp", "ep", "zero",
           "recompute", "sequence_parallel", "micro_batch", "global_batch", "seq_len",
           "precision", "tokens", "metric", "value")
# step_s and gpu_hours are the README's schema; throughputs are what many tables print
# instead (tokens per second for the whole job, or per accelerator), and need no FLOP
# convention to compare.
METRICS = ("step_s", "gpu_hours", "tokens_per_s", "tokens_per_s_per_gpu")


# The planner's fixes name scenario keys; a row sets the same knobs in its cells
ROW_TERMS = (
    (r"\bunpin pin\.(\w+) and pin\.(\w+)", r"empty the \1 and \2 cells"),
    (r"\bunpin pin\.(\w+)", r"empty the \1 cell"),
    (r"\bpin\.(tp|pp|dp|cp|ep|zero|recompute|sequence_parallel|micro_batch)\b", r"the \1 cell"),
    (r"\btraining\.(global_batch|seq_len|precision|tokens)\b", r"the \1 cell"),
    (r"\bhardware\.counts\b", "the num_gpus cell"),
    (r"; or remove \S+ from the accelerators, or use one with", ", or the gpu cell to one with"))


def _pinned(value, default):
    return default if value is None else (value,)


def knobs_for_row(row: dict) -> Knobs:
    recompute = row_word(row, "recompute")
    if recompute and recompute not in RECOMPUTE:
        raise InputError(f"row {row['id']!r}: recompute must be one of {', '.join(RECOMPUTE)}")
    sp = row_flag(row, "sequence_parallel")
    base = Knobs(gpus=(row_int(row, "num_gpus", required=True),))
    degree = {key: row_int(row, key, low=1) for key in ("tp", "pp", "cp", "ep", "dp",
                                                          "micro_batch")}
    if sp and degree["tp"] == 1:  # as the scenario's pin: refuses it (workloads.py)
        raise InputError(f"row {row['id']!r}: sequence_parallel = true splits activations "
                         "over the tensor-parallel ranks: it needs tp > 1, and the tp cell is 1",
                         fix="set sequence_parallel to false, or tp above 1 (or empty)")
    return Knobs(
        gpus=base.gpus, tp=_pinned(degree["tp"], base.tp),
        pp=_pinned(degree["pp"], None), cp=_pinned(degree["cp"], base.cp),
        ep=_pinned(degree["ep"], None), dp=_pinned(degree["dp"], None),
        zero=_pinned(row_int(row, "zero", high=3), base.zero),
        micro_batch=_pinned(degree["micro_batch"], base.micro_batch),
        recompute=(recompute_code(recompute),) if recompute else base.recompute,
        sequence_parallel=base.sequence_parallel if sp is None else (int(sp),))


def predict_row(row: dict, base_dir: Path) -> RowResult:
    published = row_float(row, "value", required=True)
    metric = row_metric(row, METRICS)
    arch = load_model(row["model"].strip(), base_dir=base_dir)
    tokens = row_float(row, "tokens")
    if metric == "gpu_hours" and tokens is None:
        raise InputError(f"row {row['id']!r}: a gpu_hours row needs tokens")
    gpu, node = load_catalog().hardware(row["gpu"].strip())  # an accelerator or a node type
    try:  # an empty cell: the chip's 16-bit type (fp16 on V100 and T4)
        precision = check_precision(row_word(row, "precision", gpu.sixteen_bit))
    except InputError as exc:
        raise InputError(f"row {row['id']!r}: {exc.message}") from None
    job = TrainingJob(seq_len=row_int(row, "seq_len", required=True),
                      global_batch=row_int(row, "global_batch", required=True),
                      tokens=tokens, precision=precision)
    result = search(arch, [gpu.name], knobs_for_row(row), job, top=1, system=node)
    best = result.best[0]
    predicted = {"step_s": best.step_s, "gpu_hours": best.gpu_hours,
                 "tokens_per_s": best.tokens_per_s,
                 "tokens_per_s_per_gpu": best.tokens_per_s / best.plan.num_gpus}[metric]
    return RowResult(id=row["id"], predicted=predicted, published=published, plan=best)


def validate_training(path: str | Path, progress=None) -> ValidationReport:
    return validate_file(path, COLUMNS, "training", predict_row, progress, terms=ROW_TERMS)
