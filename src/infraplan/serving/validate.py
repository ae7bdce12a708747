"""Predict published serving measurements (validation/README.md, "serving CSV").

A row fixes the model, the accelerator, the replica's GPUs and TP degree, the weight and
KV formats, fixed request lengths and the arrival pattern. The engine named in the row
supplies its scheduler defaults; TensorRT-LLM throughput rows (offline) were produced by
trtllm-bench, which sizes the batch limits from the request lengths, and are simulated
the same way. Other TensorRT-LLM rows (Poisson serving, static batches) came from engines
built without that dataset and keep the engine's default limits.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from infraplan.catalog import load_catalog
from infraplan.catalog.engines import PRERELEASE_TAG
from infraplan.errors import InputError, close_matches
from infraplan.serving.deployment import Deployment
from infraplan.serving.metrics import dropped_reasons, summarize
from infraplan.serving.simulate import simulate
from infraplan.serving.traffic import Requests, TrafficSpec, generate
from infraplan.models import load_model
from infraplan.validation import RowModelError, RowResult, ValidationReport, validate_file
from infraplan.validation_cells import row_choice, row_float, row_int, row_metric, row_word

COLUMNS = ("id", "source", "model", "gpu", "num_gpus", "tp", "weight_dtype", "kv_dtype",
           "input_len", "output_len", "num_requests", "arrival", "rate_per_s", "batch",
           "metric", "value")
# The capacity fixes name deployment fields; a row sets them through its cells (its
# pipeline stages are num_gpus / tp, its batch limit the batch cell or the engine's)
ROW_TERMS = (
    (r"raise tp \(now (\d+)\) or pp \(now \d+\)", r"raise tp (now \1) or num_gpus"),
    (r"lower the batch limits \(max_num_seqs or a static batch_size: now ([\d,]+); "
     r"max_num_batched_tokens: now ([\d,]+)\)",
     r"lower the batch cell (the limits now: \1 sequences, \2 batched tokens)"),
    (r"quantize the weights \(fp8, int4\)", "quantize the weights (weight_dtype fp8 or int4)"))
# Throughputs over the run's makespan, as `metrics.summarize` reports them.
THROUGHPUT_METRICS = {"output_tok_s": "output_tokens_per_s",
                      "total_tok_s": "total_tokens_per_s", "requests_per_s": "requests_per_s"}
# Latency metrics: a statistic of the per-request TTFT, TPOT or end-to-end latency. The
# README's schema names the median (p50); tables also print the mean (TensorRT-LLM's Triton
# measurements) or tail percentiles (vLLM's and GenAI-Perf's p90/p99). "itl" is TPOT under
# GenAI-Perf's name, which averages each request's gaps ((latency - TTFT) / (tokens - 1)).
# vLLM's benchmark pools every gap of every request instead: the same mean at fixed output
# lengths, but wider tails than these per-request figures.
LATENCY_METRICS = {f"{name}_{stat}_s": (f"{lat}_s", stat)
                   for name, lat in (("ttft", "ttft"), ("tpot", "tpot"), ("itl", "tpot"),
                                     ("e2e", "e2e"))
                   for stat in ("p50", "mean", "p90", "p99")}
METRICS = (*THROUGHPUT_METRICS, *LATENCY_METRICS)
ARRIVALS = ("offline", "static_batch", "poisson")


@dataclass(frozen=True)
class RowPlan:
    deployment: Deployment
    max_num_seqs: int
    max_num_batched_tokens: int
    kv_tokens: int
    stand_in: str = ""  # why FALLBACK_ENGINE simulated the row, if it did (_stand_in)

    def describe(self) -> str:
        d = self.deployment
        stand_in = f" ({self.stand_in})" if self.stand_in else ""
        batching = f"static batch {d.batch_size}" if d.batching == "static" else \
            f"max seqs {self.max_num_seqs}, max tokens {self.max_num_batched_tokens}"
        pp = f" PP={d.pp}" if d.pp > 1 else ""
        node = f" on {d.system}" if d.system else ""
        return (f"{d.engine}{stand_in} TP={d.tp}{pp}{node} w={d.weight_dtype} kv={d.kv_dtype}, "
                f"{batching}, KV {self.kv_tokens:,} tokens")


def requests_for_row(row: dict, seed: int = 0) -> Requests:
    """The row's requests: fixed lengths, all at t = 0 or a Poisson stream at its rate."""
    n = row_int(row, "num_requests", required=True)
    inp, out = (row_int(row, key, required=True) for key in ("input_len", "output_len"))
    arrival = row_word(row, "arrival")
    if arrival not in ARRIVALS:
        row_choice(row, "arrival", ARRIVALS)  # names the value and the close match
        raise InputError(f"row {row['id']!r}: the arrival cell is empty",
                         fix=f"set it to one of {', '.join(ARRIVALS)}")
    if arrival == "poisson":
        rate = row_float(row, "rate_per_s")
        if rate is None:
            raise InputError(f"row {row['id']!r}: a poisson row needs rate_per_s > 0 and the "
                             "rate_per_s cell is empty", fix="give the published request rate "
                             "(requests per second) in the rate_per_s cell, or set arrival to "
                             "offline")
        process = {"kind": "poisson", "rate_per_s": rate}
    else:
        process = {"kind": "offline"}
    return generate(TrafficSpec.model_validate({
        "arrival": process, "num_requests": n, "input": {"kind": "fixed", "value": inp},
        "output": {"kind": "fixed", "value": out}}), seed=seed)


# The common continuous-batching scheduler, for a row whose engine the catalog does not hold
FALLBACK_ENGINE = "vllm"


@lru_cache(maxsize=256)
def _engine_mention(text: str | None) -> tuple[str, str] | None:
    """The catalog engine named first in a row's free text, and the (normalised) text after
    its name. A name counts as a whole word anywhere ('Triton + TRT-LLM 24.08' is
    TensorRT-LLM); at one position the longest alias wins ('vllm-v1' over 'vllm')."""
    key = re.sub(r"[\s_]+", "-", (text or "").strip().lower())
    found: list[tuple[int, int, str]] = []
    for engine in load_catalog().engines:
        for name in (engine.name, *engine.aliases):
            pattern = rf"(?<![a-z0-9]){re.escape(name.lower().replace('_', '-'))}(?![a-z0-9])"
            hit = re.search(pattern, key)
            if hit:
                found.append((hit.start(), -len(hit.group()), engine.name))
    if not found:
        return None
    start, minus_length, engine_name = min(found)
    return engine_name, key[start - minus_length:]


NO_ENGINE = "no engine given"


def _unheld_engine(text: str | None) -> tuple[str, str] | None:
    """(the row's engine cell, or NO_ENGINE; the closest catalog name or alias, or '') when
    FALLBACK_ENGINE stands in for it; None when the catalog holds the engine."""
    if _engine_mention(text) is not None:
        return None
    cell = (text or "").strip()
    if not cell:
        return NO_ENGINE, ""
    names = [n for e in load_catalog().engines for n in (e.name, *e.aliases)]
    close = close_matches(cell.lower(), names, n=1)  # a typo, as 'vlm'
    return cell, close[0] if close else ""


def _stand_in(unheld: tuple[str, str] | None) -> str:
    """'' when the row's engine is a catalog one; else what FALLBACK_ENGINE stands in for."""
    if unheld is None:
        return ""
    cell, close = unheld
    if cell == NO_ENGINE:
        return NO_ENGINE
    return f"stand-in for {cell!r}" + (f"; did you mean {close!r}?" if close else "")


def row_notes(row: dict, base_dir: Path | None,
              unheld: tuple[str, str] | None = None) -> list[str]:
    """What a predicted row's reader should know: cells its arrival ignores, requests
    longer than the model's context (published runs extend it: a note, not a refusal),
    an engine the catalog does not hold (`unheld`, _unheld_engine's: its stand-in's
    defaults simulated the row)."""
    notes, arrival = [], row_word(row, "arrival")
    if (rate := (row.get("rate_per_s") or "").strip()) and arrival != "poisson":
        notes.append(f"rate_per_s {rate} is ignored: arrival {arrival} has no request rate "
                     "(only poisson rows use it)")
    if (batch := (row.get("batch") or "").strip()) and arrival != "static_batch":
        notes.append(f"batch {batch} is ignored: arrival {arrival} batches with the engine's "
                     "own limits (only static_batch rows use it)")
    arch = load_model(row["model"].strip(), base_dir=base_dir)
    length = sum(row_int(row, k, required=True) for k in ("input_len", "output_len"))
    if length > arch.max_position_embeddings:
        notes.append(f"input_len + output_len = {length:,} exceeds the model's "
                     f"max_position_embeddings {arch.max_position_embeddings:,}: an engine "
                     "refuses such requests unless its context is extended (RoPE scaling); "
                     "predicted as if it were")
    if unheld is not None:
        cell, close = unheld
        named = cell if cell == NO_ENGINE else f"engine {cell!r} is not in the catalog"
        notes.append(f"{named}: {FALLBACK_ENGINE}'s defaults stand in for it"
                     + (f"; did you mean {close!r}?" if close else ""))
    return notes


def engine_for_row(text: str | None) -> str:
    """The catalog engine a row's free-text engine names ('TensorRT-LLM 0.13.0', 'vLLM
    (ROCm)', 'Triton + TRT-LLM'); vLLM's defaults for an engine the catalog does not hold
    (the row's plan says it stood in)."""
    mention = _engine_mention(text)
    return mention[0] if mention else FALLBACK_ENGINE


def engine_version_for_row(text: str | None) -> str | None:
    """The release a row's engine text names ('TensorRT-LLM 0.8.0' -> '0.8.0', a pre-release
    build 'TensorRT-LLM 0.7a' -> '0.7a'); None (the newest) when it names none. Only a number
    after the catalog engine's name counts: 'NIM 1.2 (TensorRT-LLM)' names no TensorRT-LLM
    release, and 'TGI 2.0' none of the engine that stands in for it."""
    mention = _engine_mention(text)
    if mention is None:
        return None
    found = re.search(rf"\b\d+\.\d+(?:\.\d+)*(?:{PRERELEASE_TAG})?\b", mention[1])
    return found.group() if found else None


def deployment_for_row(row: dict, base_dir: Path | None = None) -> Deployment:
    engine = load_catalog().engines.get(engine_for_row(row.get("engine")))
    tp = row_int(row, "tp", low=1) or 1
    gpus = row_int(row, "num_gpus", low=1) or tp
    if gpus % tp:
        raise InputError(f"row {row['id']!r}: num_gpus={gpus} is not a multiple of tp={tp}",
                         fix="correct the num_gpus or the tp cell (num_gpus: accelerators per "
                             "replica, a multiple of tp)")
    arrival = row_word(row, "arrival")
    static = arrival == "static_batch"
    bench = engine.name == "tensorrt-llm" and arrival == "offline"
    gpu, node = load_catalog().hardware(row["gpu"].strip())  # an accelerator or a node type
    # an empty weight cell is Deployment's default: a quantized checkpoint's own format (the
    # model's path relative to the CSV), else the chip's 16-bit type, as the KV cell is
    weights = {"weight_dtype": w} if (w := row_word(row, "weight_dtype")) else {}
    # model_validate: a bad cell fails its row with the field named, not a traceback
    return Deployment.model_validate(dict(
        model=row["model"].strip(), gpu=gpu.name, system=node.name if node else None,
        tp=tp, pp=gpus // tp, **weights,
        kv_dtype=row_word(row, "kv_dtype", gpu.sixteen_bit), engine=engine.name,
        engine_version=engine_version_for_row(row.get("engine")),
        batching="static" if static else "continuous",
        batch_size=row_int(row, "batch", required=True) if static else None,
        tuning="trtllm-bench" if bench else "engine"), context={"base_dir": base_dir})


# A cell's own name in messages that name a simulator field (the CSV has no "traffic.")
_COLUMN_OF = {"traffic.num_requests": "num_requests", "traffic.input.value": "input_len",
              "traffic.output.value": "output_len", "traffic.arrival.rate_per_s": "rate_per_s",
              "deployment.batch_size": "batch", "deployment.": ""}


def _in_columns(row: dict, exc: InputError) -> InputError:
    message = exc.message
    for path, column in _COLUMN_OF.items():
        message = message.replace(path, column)
    prefix = f"row {row.get('id')!r}: "
    return InputError(message if message.startswith(prefix) else prefix + message, fix=exc.fix)


# What a replica's memory cannot hold (serving/memory.py, simulate.py): the model's limit
_CAPACITY_LIMITS = ("leave no room for the KV cache", "KV blocks; the cache holds")


def predict_row(row: dict, base_dir: Path) -> RowResult:
    metric = row_metric(row, METRICS)
    published = row_float(row, "value", required=True)
    if metric.startswith(("tpot", "itl")) and row_int(row, "output_len", required=True) < 2:
        raise InputError(f"row {row['id']!r}: {metric} needs output_len >= 2 (a one-token "
                         "answer has no time per output token)",
                         fix="correct the output_len cell, or use ttft or e2e metrics")
    try:
        dep, requests = deployment_for_row(row, base_dir), requests_for_row(row)
    except InputError as exc:
        raise _in_columns(row, exc) from None
    try:
        result = simulate(dep, requests, base_dir=base_dir)
    except InputError as exc:
        located = _in_columns(row, exc)
        if not any(limit in exc.message for limit in _CAPACITY_LIMITS):
            raise located from None  # a choice the engine or the chip lacks (tp=3, int4 KV)
        # the memory holds no KV cache or no static batch: the model's limit, not the row's
        raise RowModelError(located.message, fix=located.fix) from None
    summary = summarize(result)
    if summary["dropped"]:
        # a run whose engine refused requests published no figure to compare with
        raise RowModelError(
            f"row {row['id']!r}: the engine refuses {summary['dropped']:,} of "
            f"{summary['requests']:,} requests ({dropped_reasons(summary)})",
            fix="check input_len and output_len against the model's context, or give the "
                "replica more KV cache (a larger tp or num_gpus, a quantized weight_dtype or "
                "kv_dtype)")
    if metric in THROUGHPUT_METRICS:
        predicted = summary["throughput"][THROUGHPUT_METRICS[metric]]
    else:
        key, stat = LATENCY_METRICS[metric]
        predicted = summary[key][stat]
    r = result.replica
    unheld = _unheld_engine(row.get("engine"))
    plan = RowPlan(dep, r.max_num_seqs, r.max_num_batched_tokens, r.memory.kv_tokens,
                   stand_in=_stand_in(unheld))
    cell, close = unheld or ("", "")
    return RowResult(id=row["id"], predicted=predicted, published=published, plan=plan,
                     notes=tuple(row_notes(row, base_dir, unheld)), stand_in=cell,
                     stand_in_match=close)


def validate_serving(path: str | Path, progress=None) -> ValidationReport:
    return validate_file(path, COLUMNS, "serving", predict_row, progress,
                         optional=("derivation", "engine"), terms=ROW_TERMS)
