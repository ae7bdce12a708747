"""Run a deployment on a stream of requests: replicas behind a router, continuous or static
batching. Deterministic: the same requests give the same result (the only randomness is in
generating the requests, which takes a seed)."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from infraplan.errors import InputError
from infraplan.reprs import compact_repr
from infraplan.serving.deployment import Deployment, ResolvedReplica, resolve
from infraplan.serving.engine import INF, TIMELINE_POINTS, Replica
from infraplan.serving.request_book import RequestBook
from infraplan.serving.step_time import steps_at_floor
from infraplan.serving.traffic import Requests


@dataclass
class SimResult:
    deployment: Deployment
    replica: ResolvedReplica
    requests: Requests
    first_token_s: np.ndarray  # NaN: never started
    finish_s: np.ndarray  # NaN: dropped
    preemptions: np.ndarray
    dropped: dict[int, str]
    replica_of: np.ndarray
    steps: int
    busy_s: np.ndarray  # per replica
    block_seconds: np.ndarray  # per replica: integral of KV blocks in use over time
    peak_blocks: np.ndarray  # per replica
    waiting_seconds: np.ndarray  # per engine: integral of its waiting queue over time
    peak_waiting: np.ndarray  # per engine: its longest waiting queue
    timeline: dict[str, np.ndarray] = field(default_factory=dict)
    wall_s: float = 0.0
    engine_kv_blocks: int = 0  # the cache blocks one engine holds (a replica's / pp)
    decode_steps: int = 0  # of `steps`, decode steps: one a generated token under speculation

    __repr__ = compact_repr

    @property
    def completed(self) -> np.ndarray:
        return np.isfinite(self.finish_s)


def simulate(dep: Deployment, requests: Requests, *, base_dir: Path | None = None,
             resolved: ResolvedReplica | None = None, progress=None,
             arch=None) -> SimResult:
    """Run the deployment over the requests; `progress(done, total)` hears of arrivals
    in chunks (nothing is added to the per-request loop)."""
    start = time.perf_counter()
    if not isinstance(dep, Deployment):
        raise InputError(f"simulate takes a Deployment, got {type(dep).__name__}",
                         fix="build one: Deployment(model=..., gpu=...), or a "
                             "ServeScenario's with scenario.deployment_spec() (or run "
                             "simulate_scenario(scenario))")
    if not isinstance(requests, Requests):
        raise InputError(f"simulate takes Requests, got {type(requests).__name__}",
                         fix="generate(TrafficSpec, seed=...) makes them")
    if len(requests) == 0:
        raise InputError("no requests to simulate", fix="set num_requests or duration_s > 0")
    r = resolved or resolve(dep, base_dir=base_dir, arch=arch, mean_lengths=(
        float(requests.input_tokens.mean()), float(requests.output_tokens.mean())))
    book = RequestBook(requests.input_tokens, requests.output_tokens)
    n = len(requests)
    replica_of = np.zeros(n, dtype=np.int32)
    engine_kv_blocks = r.memory.kv_blocks
    if dep.batching == "static":
        run_batch = _executor_batch if r.static_executor else _static_batch
        engines = [_replica(r, book, r.memory.kv_blocks, dep.batch_size)
                   if r.static_executor else _StaticEngine() for _ in range(dep.replicas)]
        _dispatch_batches(r, requests, book, engines, run_batch, replica_of)
    else:
        # Pipeline stages keep pp batches in flight: pp engines per replica, each with its
        # own scheduler and 1/pp of the cache, as vLLM's virtual engines (its V0 Scheduler
        # divides num_gpu_blocks by pipeline_parallel_size), routed like replicas.
        engine_kv_blocks = r.memory.kv_blocks // dep.pp
        engines = [_replica(r, book, engine_kv_blocks, r.max_num_seqs)
                   for _ in range(dep.replicas * dep.pp)]
        arrivals = requests.arrival_s.tolist()
        for first in range(0, n, PROGRESS_CHUNK):
            _route(engines, arrivals, dep.router, replica_of, first, min(n, first + PROGRESS_CHUNK))
            if progress:
                progress(min(n, first + PROGRESS_CHUNK), n)
        for e in engines:
            e.run_until(INF)
    finish = np.array(book.finish_s)
    timeline = _merge_timelines(engines)
    return SimResult(deployment=dep, replica=r, requests=requests,
                     first_token_s=np.array(book.first_token_s), finish_s=finish,
                     preemptions=np.array(book.preemptions), dropped=book.dropped,
                     replica_of=replica_of, steps=sum(e.steps for e in engines),
                     decode_steps=sum(e.decode_steps for e in engines),
                     busy_s=np.array([e.busy_s for e in engines]),
                     block_seconds=np.array([e.block_seconds for e in engines]),
                     peak_blocks=np.array([e.peak_used for e in engines]),
                     waiting_seconds=np.array([e.waiting_seconds for e in engines]),
                     peak_waiting=np.array([e.peak_waiting for e in engines]),
                     timeline=timeline, wall_s=time.perf_counter() - start,
                     engine_kv_blocks=engine_kv_blocks)


PROGRESS_CHUNK = 1 << 15  # requests routed between two progress reports


def _replica(r: ResolvedReplica, book: RequestBook, kv_blocks: int,
             max_num_seqs: int) -> Replica:
    """One continuous-batching engine of the resolved deployment."""
    return Replica(r.step, kv_blocks=kv_blocks, block_size=r.memory.block_size,
                   max_num_seqs=max_num_seqs, max_num_batched_tokens=r.max_num_batched_tokens,
                   chunked_prefill=r.chunked_prefill, kv_policy=r.kv_policy, requests=book,
                   max_model_len=r.arch.max_position_embeddings
                   if r.engine.rejects_beyond_model_context else None)


def _route(engines: list[Replica], arrivals: list[float], router: str,
           replica_of: np.ndarray, first: int, end: int) -> None:
    """Hand requests first..end-1 to the replicas as they arrive."""
    count = len(engines)
    if count == 1:
        e = engines[0]
        run_until, submit = e.run_until, e.submit
        for rid in range(first, end):
            t = arrivals[rid]
            run_until(t)
            submit(rid, t)
    elif router == "round_robin":
        for rid in range(first, end):
            t = arrivals[rid]
            e = engines[rid % count]
            e.run_until(t)
            e.submit(rid, t)
            replica_of[rid] = rid % count
    else:  # least outstanding requests; ties go to the lowest index
        for rid in range(first, end):
            t = arrivals[rid]
            best, best_load = 0, math.inf
            for i, e in enumerate(engines):
                e.run_until(t)
                load = e.outstanding
                if load < best_load:
                    best, best_load = i, load
            engines[best].submit(rid, t)
            replica_of[rid] = best


class _StaticEngine:
    """Summary of a static-batching run (the same attributes the result reads)."""

    def __init__(self):
        self.steps, self.busy_s, self.block_seconds, self.peak_used = 0, 0.0, 0.0, 0
        self.decode_steps = 0
        self.waiting_seconds, self.peak_waiting = 0.0, 0
        self.timeline: list[tuple[float, float, int, int, float]] = []


def _dispatch_batches(r: ResolvedReplica, requests: Requests, book: RequestBook, engines,
                      run_batch, replica_of: np.ndarray) -> None:
    """Batches of `batch_size` requests in arrival order, each to the replica free first;
    a batch starts when its last request has arrived and that replica's previous batch is
    done. `run_batch(engine, lo, hi, start)` runs requests lo..hi-1 and returns when the
    replica is free again."""
    size, free_at = r.deployment.batch_size, [0.0] * len(engines)
    for lo in range(0, len(requests), size):
        hi = min(lo + size, len(requests))
        j = min(range(len(engines)), key=free_at.__getitem__)  # ties: the lowest index
        start = max(free_at[j], float(requests.arrival_s[hi - 1]))
        # just before it starts, every request that has arrived and not started waits
        # (later batches' too)
        arrived = int(np.searchsorted(requests.arrival_s, start, side="right"))
        engines[j].peak_waiting = max(engines[j].peak_waiting, arrived - lo)
        free_at[j] = run_batch(r, requests, book, engines[j], lo, hi, start)
        replica_of[lo:hi] = j


def _static_batch(r: ResolvedReplica, requests: Requests, book: RequestBook,
                  out: _StaticEngine, lo: int, hi: int, start: float) -> float:
    """Static batching (FasterTransformer, TensorRT-LLM's gptSessionBenchmark): the batch
    prefills every prompt in one pass, then decodes until its longest output is done,
    finished sequences still occupying their slots."""
    step, block, n = r.step, r.memory.block_size, hi - lo
    lengths_in, lengths_out = requests.input_tokens[lo:hi], requests.output_tokens[lo:hi]
    blocks = int(np.sum(-(-(lengths_in + lengths_out) // block)))
    if blocks > r.memory.kv_blocks:
        raise InputError(f"static batch of {n} requests needs {blocks} KV blocks; the "
                         f"cache holds {r.memory.kv_blocks}",
                         fix="lower batch_size, raise tp or quantize the KV cache")
    pairs = float(np.sum(lengths_in * (lengths_in + 1) // 2))
    prefill = _prefill_time(step, int(lengths_in.sum()), n, pairs)
    first = start + prefill
    steps = int(lengths_out.max()) - 1
    decode_s = _static_decode(step, n, c=float(lengths_in.sum()) + n)
    ends = first + decode_s(lengths_out - 1)
    for i, rid in enumerate(range(lo, hi)):
        book.first_token(rid, first)
        book.finish(rid, float(ends[i]))
    total = float(decode_s(np.array(steps)))
    out.block_seconds += blocks * (prefill + total)
    out.peak_used = max(out.peak_used, blocks)
    out.busy_s += prefill + total
    out.steps += 1 + steps
    out.decode_steps += steps
    # the batch's requests waited from their arrival to its start
    out.waiting_seconds += float(np.sum(start - requests.arrival_s[lo:hi]))
    out.timeline.append((first + total, out.waiting_seconds, n, blocks, out.block_seconds))
    return first + total


def _executor_batch(r: ResolvedReplica, requests: Requests, book: RequestBook,
                    engine: Replica, lo: int, hi: int, start: float) -> float:
    """A static batch handed whole to an in-flight batching scheduler (vLLM's, SGLang's and
    LMDeploy's offline generate(); TensorRT-LLM from 0.10, ModelRunnerCpp on the Executor
    API; engines.yaml executor_static_batches): the engine admits what its paged cache
    holds and the rest as earlier requests finish, so a batch larger than the cache runs
    in waves instead of failing."""
    engine.run_until(start)
    arrivals = requests.arrival_s
    for rid in range(lo, hi):
        engine.submit(rid, float(arrivals[rid]))
    engine.run_until(INF)
    # a request the cache can never hold is dropped (NaN finish) and holds nothing up
    return max((t for t in book.finish_s[lo:hi] if t == t), default=start)


def _static_decode(step, n: int, c: float):
    """Seconds the first J decode steps of a static batch of n take, as a function of J
    (an array). Step j reads c + n j cached tokens and costs a + b (c + n j), or the host's
    floor f while that is longer (the first steps_at_floor of them)."""
    a, b = step.decode_coefficients(n)
    f = step.floor_s(n)
    h = steps_at_floor(a, b, f, c, n)

    def seconds(j: np.ndarray) -> np.ndarray:
        host = np.minimum(j, h)  # steps at the floor, then steps host .. j - 1 on the GPU
        gpu = j - host
        first_j = j * (j - 1) / 2.0 - host * (host - 1) / 2.0  # sum of the GPU steps' j
        return host * f + gpu * (a + b * c) + b * n * first_j

    return seconds


def _prefill_time(step, tokens: int, n: int, pairs: float) -> float:
    """A batch's prefill in passes of at most the step table's tokens."""
    limit = step.max_tokens
    if tokens <= limit:
        return step.time(tokens, 0, n, pairs, 0.0)
    passes = math.ceil(tokens / limit)
    return passes * step.time(limit, 0, max(n // passes, 1), pairs / passes, 0.0)


def _merge_timelines(engines) -> dict[str, np.ndarray]:
    """The deployment's queue over time, summed over its engines on one grid of at most
    TIMELINE_POINTS intervals: at each interval's end `t_s`, the mean number of requests
    waiting and of KV blocks in use over the interval (from the engines' running totals of
    seconds waited and block-seconds, so a queue that forms and clears between two samples
    still counts), and the sequences running at its end."""
    series = [np.array(e.timeline, dtype=float) for e in engines if e.timeline]
    if not series:
        return {"t_s": np.zeros(0), "waiting": np.zeros(0), "running": np.zeros(0),
                "kv_blocks": np.zeros(0)}
    end = max(float(a[-1, 0]) for a in series)
    points = min(TIMELINE_POINTS, max(len(a) for a in series))
    grid = np.linspace(0.0, end, points + 1)
    waited, block_s, running = (np.zeros(points + 1) for _ in range(3))
    for a in series:
        t = a[:, 0]
        # running totals grow linearly between samples; past the last, the last holds
        waited += np.interp(grid, t, a[:, 1], left=0.0)
        block_s += np.interp(grid, t, a[:, 4], left=0.0)
        at = np.searchsorted(t, grid, side="right") - 1
        running += np.where(at >= 0, a[np.maximum(at, 0), 2], 0.0)
    dt = np.maximum(np.diff(grid), 1e-12)
    return {"t_s": grid[1:], "waiting": np.diff(waited) / dt, "running": running[1:],
            "kv_blocks": np.diff(block_s) / dt}
