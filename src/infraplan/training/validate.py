"""Predict published training measurements (validation/README.md, "training CSV").

Each row fixes the model, the accelerator, the GPU count, the batch and sequence, and
whatever parallel knobs it publishes; the planner chooses the knobs left empty (and the
virtual pipeline stages, which the schema has no column for): the fastest plan that fits.
"""

from __future__ import annotations

import math
from pathlib import Path

from infraplan.catalog import load_catalog
from infraplan.errors import InputError
from infraplan.models import load_model
from infraplan.physics import hardware
from infraplan.physics.memory.training import RECOMPUTE, recompute_code
from infraplan.training.evaluate import TrainingJob
from infraplan.training.memory import check_precision, model_notes
from infraplan.training.search import search
from infraplan.training.space import Knobs
from infraplan.validation import RowModelError, RowResult, ValidationReport, validate_file
from infraplan.validation_cells import (row_choice, row_flag, row_float, row_int, row_metric,
                                        row_word)
from infraplan.workloads import MAX_ACCELERATORS

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
    recompute = row_choice(row, "recompute", RECOMPUTE)
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


def check_arithmetic(row: dict, knobs: Knobs, arch, global_batch: int) -> None:
    """Refuse at once a plan that arithmetic rules out, before the search tries every
    split of it: too many GPUs, more data-parallel ranks than sequences, pinned degrees
    whose product is not num_gpus. (A million GPUs would take the search minutes.)"""
    n, rid = knobs.gpus[0], row["id"]
    if n > MAX_ACCELERATORS:
        raise InputError(f"row {rid!r}: num_gpus={n:,} is above the {MAX_ACCELERATORS:,} "
                         "accelerators a plan may use", fix="give the published run's GPU "
                         f"count (at most {MAX_ACCELERATORS:,}) in the num_gpus cell")
    pin = {k: (v[0] if v is not None and len(v) == 1 else None) for k, v in
           (("tp", knobs.tp), ("pp", knobs.pp), ("cp", knobs.cp), ("dp", knobs.dp))}
    if pin["dp"] and pin["dp"] > global_batch:
        raise InputError(f"row {rid!r}: dp={pin['dp']:,} is more than global_batch="
                         f"{global_batch:,}: each data-parallel rank needs a sequence a step",
                         fix="check the dp and global_batch cells (or empty dp)")
    given = {k: v for k, v in pin.items() if v}
    product = math.prod(given.values())
    shown = "*".join(given)
    if len(given) == 4 and product != n:
        raise InputError(f"row {rid!r}: tp*pp*cp*dp must equal num_gpus ("
                         f"{'*'.join(map(str, given.values()))} = {product:,} != {n:,})",
                         fix="correct the num_gpus cell or one of tp, pp, cp, dp (or empty dp "
                             "and the planner takes what the GPU count leaves)")
    if given and n % product:
        cells = f"{', '.join(given)} cell{'s' if len(given) > 1 else ''}"
        raise InputError(f"row {rid!r}: num_gpus={n:,} is not a multiple of {shown} = "
                         f"{product:,}", fix=f"correct the num_gpus cell or the {cells}")
    micro = knobs.micro_batch[0] if len(knobs.micro_batch) == 1 else 1
    bound = {"dp": pin["dp"] or max(global_batch // micro, 1),
             "tp": pin["tp"] or max(knobs.tp), "pp": pin["pp"] or arch.num_layers,
             "cp": pin["cp"] or max(knobs.cp)}
    most = math.prod(bound.values())
    if n > most:
        raise InputError(f"row {rid!r}: num_gpus={n:,} is more than any plan can use: "
                         "dp x tp x pp x cp is at most "
                         f"{' x '.join(f'{v:,}' for v in bound.values())} = {most:,} "
                         f"(dp: at most global_batch / micro_batch sequences)",
                         fix="check the num_gpus, global_batch and parallel cells")


def predict_row(row: dict, base_dir: Path) -> RowResult:
    published = row_float(row, "value", required=True)
    metric = row_metric(row, METRICS)
    arch = load_model(row["model"].strip(), base_dir=base_dir)
    tokens = row_float(row, "tokens")
    if metric == "gpu_hours" and tokens is None:
        raise InputError(f"row {row['id']!r}: a gpu_hours row needs tokens and the tokens "
                         "cell is empty", fix="give the run's total training tokens in the "
                         "tokens cell (a plain number such as 3e11)")
    gpu, node = load_catalog().hardware(row["gpu"].strip())  # an accelerator or a node type
    try:  # an empty cell: the chip's 16-bit type (fp16 on V100 and T4)
        precision = check_precision(row_word(row, "precision", gpu.sixteen_bit))
    except InputError as exc:
        raise InputError(f"row {row['id']!r}: {exc.message}", fix=exc.fix or "set the "
                         "precision cell to one of them, or leave it empty (the chip's 16-bit "
                         "type)") from None
    job = TrainingJob(seq_len=row_int(row, "seq_len", required=True),
                      global_batch=row_int(row, "global_batch", required=True),
                      tokens=tokens, precision=precision)
    knobs = knobs_for_row(row)
    check_arithmetic(row, knobs, arch, job.global_batch)
    try:
        result = search(arch, [gpu.name], knobs, job, top=1, system=node)
    except InputError as exc:  # nothing fits in memory: the model's limit, not the row's
        if exc.message.startswith("no runnable plan"):
            raise
        raise RowModelError(exc.message, fix=exc.fix) from None
    best = result.best[0]
    predicted = {"step_s": best.step_s, "gpu_hours": best.gpu_hours,
                 "tokens_per_s": best.tokens_per_s,
                 "tokens_per_s_per_gpu": best.tokens_per_s / best.plan.num_gpus}[metric]
    notes = tuple(model_notes(arch, job.seq_len))  # past the positions: context extension
    if metric == "gpu_hours":  # a whole run's hours, as plan train counts them
        goodput = hardware.calibration("run-goodput")
        notes += (f"predicted gpu_hours = {best.gpu_hours * goodput:,.0f} steady-state "
                  f"GPU-hours / {goodput:.0%} run goodput (restarts, checkpoints, evaluation; "
                  "calibration 'run-goodput')",)
    return RowResult(id=row["id"], predicted=predicted, published=published, plan=best,
                     notes=notes)


def validate_training(path: str | Path, progress=None) -> ValidationReport:
    return validate_file(path, COLUMNS, "training", predict_row, progress, terms=ROW_TERMS)
