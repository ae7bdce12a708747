"""The event simulator: invariants under random workloads, the closed-form jump against
stepping token by token, exact block accounting, static batching, routers."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infraplan.catalog import load_catalog
from infraplan.serving.deployment import Deployment, resolve
from infraplan.serving.engine import INF, Replica
from infraplan.serving.request_book import RequestBook
from infraplan.serving.metrics import summarize
from infraplan.serving.simulate import simulate
from infraplan.serving.traffic import Requests

DEP = Deployment(model="llama-3.1-8b", gpu="h100", engine="vllm")
RESOLVED = resolve(DEP)


def requests(n, seed, rate, in_max=3000, out_max=600):
    rng = np.random.default_rng(seed)
    arrivals = np.zeros(n) if rate is None else np.cumsum(rng.exponential(1 / rate, n))
    return Requests(arrivals, rng.integers(1, in_max, n), rng.integers(1, out_max, n))


def replica(book, *, blocks, policy, chunked, max_seqs, budget, block_size=16,
            cls=Replica, step=RESOLVED.step):
    return cls(step, kv_blocks=blocks, block_size=block_size, max_num_seqs=max_seqs,
               max_num_batched_tokens=budget, chunked_prefill=chunked, kv_policy=policy,
               requests=book)


class Checked(Replica):
    """Checks the invariants after every step."""

    def _advance_clock(self, dt, steps=1):
        before = self.now
        super()._advance_clock(dt, steps)
        assert self.now >= before and dt > 0
        assert self.used <= self.capacity
        self.checks = getattr(self, "checks", 0) + 1

    def _pop_finished(self):
        super()._pop_finished()
        assert self.used == self.blocks_by_sequence()


class TokenByToken(Replica):
    """The same scheduler without the closed-form jump: one decode step at a time."""

    def _decode_jump(self, t_limit, max_steps=None):
        super()._decode_jump(t_limit, max_steps=1)


class StepByStepTime(TokenByToken):
    """Stepping one decode step at a time, each checked against StepModel.time."""

    def _decode_jump(self, t_limit, max_steps=None):
        n, steps, now, ctx = len(self.running), self.steps, self.now, self.ctx
        super()._decode_jump(t_limit, max_steps)
        if self.steps > steps:
            assert self.now - now == pytest.approx(self.step.time(0, n, n, 0.0, ctx + n),
                                                   rel=1e-12)


def run(rep_cls, reqs, **kw):
    book = RequestBook(reqs.input_tokens.tolist(), reqs.output_tokens.tolist())
    rep = replica(book, cls=rep_cls, **kw)
    for rid, t in enumerate(reqs.arrival_s.tolist()):
        rep.run_until(t)
        rep.submit(rid)
    rep.run_until(INF)
    return book, rep


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 60), seed=st.integers(0, 10_000),
       rate=st.one_of(st.none(), st.floats(0.5, 200)),
       blocks=st.integers(8, 600), policy=st.sampled_from(["on_demand", "reserve"]),
       chunked=st.booleans(), max_seqs=st.integers(1, 64), budget=st.integers(64, 4096),
       block_size=st.sampled_from([1, 16, 32]))
def test_invariants_under_random_workloads(n, seed, rate, blocks, policy, chunked, max_seqs,
                                           budget, block_size):
    reqs = requests(n, seed, rate, in_max=1500, out_max=300)
    book, rep = run(Checked, reqs, blocks=blocks, policy=policy, chunked=chunked,
                    max_seqs=max_seqs, budget=budget, block_size=block_size)
    finish, first = np.array(book.finish_s), np.array(book.first_token_s)
    done = np.isfinite(finish)
    # every request completes or is reported dropped, never both
    assert set(np.flatnonzero(~done)) == set(book.dropped)
    assert not (set(np.flatnonzero(done)) & set(book.dropped))
    # causality: arrival <= first token <= finish
    assert np.all(first[done] >= reqs.arrival_s[done] - 1e-12)
    assert np.all(finish[done] >= first[done])
    # a request drops only when it could never fit alone
    for rid in book.dropped:
        need = -(-(book.prompt[rid] + book.output[rid]) // block_size)
        assert need > blocks or (not chunked and book.prompt[rid] > budget)
    assert rep.used == 0 and not rep.running and not rep.waiting


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 40), seed=st.integers(0, 10_000), rate=st.floats(1, 100),
       blocks=st.integers(200, 3000), policy=st.sampled_from(["on_demand", "reserve"]))
def test_closed_form_jump_equals_token_by_token(n, seed, rate, blocks, policy):
    reqs = requests(n, seed, rate, in_max=800, out_max=300)
    kw = dict(blocks=blocks, policy=policy, chunked=True, max_seqs=32, budget=1024)
    fast, fast_rep = run(Replica, reqs, **kw)
    slow, slow_rep = run(TokenByToken, reqs, **kw)
    assert fast.dropped == slow.dropped
    np.testing.assert_allclose(fast.finish_s, slow.finish_s, rtol=1e-9)
    np.testing.assert_allclose(fast.first_token_s, slow.first_token_s, rtol=1e-9)
    assert fast.preemptions == slow.preemptions
    assert fast_rep.steps == slow_rep.steps


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 40), seed=st.integers(0, 10_000), rate=st.floats(1, 100),
       policy=st.sampled_from(["on_demand", "reserve"]), host_s=st.floats(50e-6, 2e-3))
def test_closed_form_jump_equals_token_by_token_under_a_host_floor(n, seed, rate, policy,
                                                                   host_s):
    """A host loop beside the GPU (floor_s) holds early steps at its floor until the growing
    cache makes the GPU's time the longer; the jump must cross that switch exactly."""
    reqs = requests(n, seed, rate, in_max=800, out_max=300)
    step = replace(RESOLVED.step, host_s_per_sequence=host_s)
    kw = dict(blocks=2000, policy=policy, chunked=True, max_seqs=32, budget=1024, step=step)
    fast, fast_rep = run(Replica, reqs, **kw)
    slow, slow_rep = run(StepByStepTime, reqs, **kw)
    np.testing.assert_allclose(fast.finish_s, slow.finish_s, rtol=1e-9)
    np.testing.assert_allclose(fast.first_token_s, slow.first_token_s, rtol=1e-9)
    assert fast_rep.steps == slow_rep.steps


def test_preemption_happens_and_everything_completes():
    reqs = requests(200, 1, None, in_max=400, out_max=800)
    book, _ = run(Checked, reqs, blocks=300, policy="on_demand", chunked=True,
                    max_seqs=64, budget=2048)
    assert sum(book.preemptions) > 0
    assert not book.dropped and all(math.isfinite(f) for f in book.finish_s)
    # reserve never preempts
    book, _ = run(Checked, reqs, blocks=300, policy="reserve", chunked=True, max_seqs=64,
                  budget=2048)
    assert sum(book.preemptions) == 0


def test_same_input_same_result_and_seed_matters():
    a = simulate(DEP, requests(500, 3, 20.0))
    b = simulate(DEP, requests(500, 3, 20.0))
    c = simulate(DEP, requests(500, 4, 20.0))
    np.testing.assert_array_equal(a.finish_s, b.finish_s)
    assert not np.array_equal(a.finish_s, c.finish_s)


def test_single_request_latency_is_prefill_plus_decode_steps():
    """One request alone: TTFT is one prefill step, then out-1 decode steps of a + b ctx."""
    r = Requests(np.zeros(1), np.array([1000]), np.array([101]))
    res = simulate(DEP, r)
    step = RESOLVED.step
    prefill = step.time(1000, 0, 1, 1000 * 1001 // 2, 0)
    a, b = step.decode_coefficients(1)
    decode = sum(a + b * (1000 + 1 + j) for j in range(100))
    assert res.first_token_s[0] == pytest.approx(prefill, rel=1e-12)
    assert res.finish_s[0] == pytest.approx(prefill + decode, rel=1e-9)


def test_static_batching_waits_for_the_longest_output():
    r = Requests(np.zeros(4), np.full(4, 100), np.array([10, 20, 30, 40]))
    dep = DEP.model_copy(update={"batching": "static", "batch_size": 4})
    res = simulate(dep, r)
    first = res.first_token_s
    assert np.all(first == first[0])
    gaps = np.diff(res.finish_s)
    assert np.all(gaps > 0)  # each finishes after its own output length
    two = simulate(dep, Requests(np.zeros(8), np.full(8, 100), np.full(8, 40)))
    # the second batch starts when the first has finished
    assert two.first_token_s[4] > two.finish_s[3]


def test_the_queue_is_the_time_average_of_requests_not_yet_scheduled():
    """One sequence at a time: each request waits, from its arrival (a step under way
    included), until the one before it finishes. The queue read 0.5 waiting for a replica
    idle most of the run: a mean of samples taken only while it stepped, counting the
    prompt being prefilled as waiting."""
    dep = DEP.model_copy(update={"max_num_seqs": 1})
    r = Requests(np.array([0.0, 0.001, 0.002]), np.full(3, 1000), np.full(3, 20))
    res = simulate(dep, r)
    finish = res.finish_s
    assert res.first_token_s[0] > 0.002  # both arrived during the first prefill
    waited = (finish[0] - 0.001) + (finish[1] - 0.002)
    assert res.waiting_seconds.sum() == pytest.approx(waited, rel=1e-9)
    assert res.peak_waiting.tolist() == [2]
    queue = summarize(res)["queue"]
    assert queue["mean_waiting"] == pytest.approx(waited / finish[2], rel=1e-9)
    # static batching: a batch's requests wait for its last one to arrive
    static = DEP.model_copy(update={"engine": "tensorrt-llm", "engine_version": "0.9",
                                    "batching": "static", "batch_size": 4})
    late = simulate(static, Requests(np.arange(4.0), np.full(4, 100), np.full(4, 10)))
    assert late.waiting_seconds.sum() == pytest.approx(3 + 2 + 1 + 0)
    assert late.peak_waiting.tolist() == [4]  # all four at t = 3, as the batch starts
    # overloaded static batches, handed to an in-flight batcher (vLLM) or run as one pass:
    # the queue outside the engine counts in the peak as in the mean (178.6 > 16)
    flood = requests(400, seed=1, rate=10.0)
    for dep in (static, DEP.model_copy(update={"batching": "static", "batch_size": 16})):
        queue = summarize(simulate(dep, flood))["queue"]
        assert queue["mean_waiting"] > 20 and queue["max_waiting"] >= queue["mean_waiting"]


def test_without_chunked_prefill_a_preempted_sequence_waits_for_the_watermark():
    """Prefill-only steps cannot set aside the decodes' next blocks. Admitting into the last
    free block, the engine re-admitted each preempted sequence into the blocks it had just
    freed: 139,648 preemptions for 1,000 requests and 79 x the chunked makespan."""
    dep = DEP.model_copy(update={"weight_dtype": "fp8", "max_num_seqs": 1024})
    r = Requests(np.zeros(1000), np.full(1000, 1000), np.full(1000, 250))
    chunked = simulate(dep, r)
    whole = simulate(dep.model_copy(update={"chunked_prefill": False}), r)
    assert chunked.preemptions.sum() > 0  # the cache is the limit in both
    assert whole.preemptions.max() <= 10 and whole.preemptions.sum() < 200  # 7 and 125
    assert whole.finish_s.max() == pytest.approx(chunked.finish_s.max(), rel=0.1)
    assert whole.peak_blocks.max() <= resolve(dep).memory.kv_blocks


@pytest.mark.parametrize("engine, version", [("tensorrt-llm", "0.9"),  # one static pass
                                             ("vllm", None)])  # the in-flight batcher
def test_static_batches_go_to_the_replica_free_first(engine, version):
    """Replicas ran static batches one after another on one engine, with the cost and the
    capacity of all of them: 4 replicas gave 1 replica's throughput."""
    dep = DEP.model_copy(update={"engine": engine, "engine_version": version,
                                 "batching": "static", "batch_size": 16,
                                 "weight_dtype": "fp8"})
    assert resolve(dep).static_executor == (version is None)
    r = Requests(np.zeros(128), np.full(128, 500), np.full(128, 100))
    one, four = simulate(dep, r), simulate(dep.model_copy(update={"replicas": 4}), r)
    assert (one.replica_of == 0).all()
    assert np.bincount(four.replica_of).tolist() == [32] * 4  # 2 batches of 16 each
    # the same batches, four at a time: a quarter of the makespan, to the rounding
    assert four.finish_s.max() == pytest.approx(one.finish_s.max() / 4, rel=1e-9)
    assert sorted(four.finish_s - four.first_token_s) == pytest.approx(
        sorted(one.finish_s - one.first_token_s), rel=1e-9)
    for res, engines in ((one, 1), (four, 4)):  # back to back: every engine always busy
        assert len(res.busy_s) == engines
        assert res.busy_s.sum() == pytest.approx(engines * res.finish_s.max(), rel=1e-6)


def test_a_static_batch_pays_the_host_floor_step_by_step():
    """Static decode steps cost max(a + b ctx, floor): with a floor between the first and the
    last step's GPU time, the finish times are the step-by-step sums. (TensorRT-LLM naming
    no release: a session whose finished sequences keep their slots to the batch's end.)"""
    dep = DEP.model_copy(update={"engine": "tensorrt-llm", "batching": "static",
                                 "batch_size": 8})
    step = resolve(dep).step
    a, b = step.decode_coefficients(8)
    ctx0 = 8 * 2000 + 8  # the first decode step reads the prompts and its own tokens
    host_s = (a + b * (ctx0 + 8 * 150)) / 8  # the GPU overtakes the floor at step 150
    floored = replace(resolve(dep), step=replace(step, host_s_per_sequence=host_s))
    outs = np.array([50, 120, 200, 300, 301, 302, 400, 500])
    r = Requests(np.zeros(8), np.full(8, 2000), outs)
    res = simulate(dep, r, resolved=floored)
    per_step = np.maximum(a + b * (ctx0 + 8 * np.arange(500)), 8 * host_s)
    ends = res.first_token_s[0] + np.concatenate(([0.0], np.cumsum(per_step)))[outs - 1]
    np.testing.assert_allclose(res.finish_s, ends, rtol=1e-12)
    assert per_step[0] == 8 * host_s and per_step[-1] > 8 * host_s


def test_a_static_batch_may_fill_the_memory_the_weights_leave():
    """gptSessionBenchmark allocates the cache for its batch alone: Llama 2 7B in fp16 on
    one A100, 60 requests of 128 + 2048 tokens (TensorRT-LLM 0.6.1's published cell), need
    63.75 GiB of KV cache beside 12.6 GiB of weights: more than TensorRT-LLM's 0.95 of the
    free memory that continuous batching keeps, less than all of it."""
    dep = Deployment(model="llama-2-7b", gpu="a100-sxm4-80gb", engine="tensorrt-llm",
                     weight_dtype="fp16", kv_dtype="fp16", batching="static", batch_size=60)
    mem = resolve(dep).memory
    need_bytes = 60 * (128 + 2048) * mem.kv_bytes_per_token
    assert need_bytes == 60 * 2176 * 32 * 2 * 4096 * 2  # layers x (K, V) x h x fp16
    left = mem.device_bytes - mem.weight_bytes - mem.activation_bytes - mem.overhead_bytes
    assert mem.kv_bytes == left
    assert 0.95 * left < need_bytes < left
    res = simulate(dep, Requests(np.zeros(60), np.full(60, 128), np.full(60, 2048)))
    assert res.completed.all()
    continuous = resolve(dep.model_copy(update={"batching": "continuous", "batch_size": None,
                                                "max_num_seqs": 60})).memory
    assert continuous.kv_bytes == pytest.approx(0.95 * left)


def test_an_executor_release_runs_a_static_batch_in_waves_of_what_its_cache_holds():
    """From TensorRT-LLM 0.10 a static batch goes through the in-flight batcher: its paged
    cache takes 0.9 of the free memory where a contiguous one takes all of it, the requests
    that fit run first and the rest are admitted as they finish, and the next batch starts
    only when the last one is done. Llama 2 7B with an int8 cache on a 40 GB A100: 64
    sequences of 2,048 tokens fit the contiguous cache, not the paged one."""
    base = dict(model="llama-2-7b", gpu="a100-sxm4-40gb", engine="tensorrt-llm",
                weight_dtype="int8", kv_dtype="int8", batching="static", batch_size=64)
    session = resolve(Deployment(**base, engine_version="0.9.0")).memory
    dep = Deployment(**base, engine_version="0.11.0")
    r = resolve(dep)
    mem = r.memory
    left = mem.device_bytes - mem.weight_bytes - mem.activation_bytes - mem.overhead_bytes
    assert session.kv_bytes == left
    assert 0.9 * left - mem.block_size * mem.kv_bytes_per_token < mem.kv_bytes <= 0.9 * left
    per_request = 2048 // mem.block_size
    fits = mem.kv_blocks // per_request
    assert session.kv_blocks >= 64 * per_request > mem.kv_blocks and fits > 32
    res = simulate(dep, Requests(np.zeros(128), np.full(128, 1024), np.full(128, 1024)))
    assert res.completed.all()
    for batch in (slice(0, 64), slice(64, 128)):
        first, finish = res.first_token_s[batch], res.finish_s[batch]
        assert np.sum(first < finish.min()) == fits  # the first wave
    assert res.first_token_s[64:].min() >= res.finish_s[:64].max()


@pytest.mark.parametrize("router", ["round_robin", "least_outstanding"])
def test_replicas_share_the_load(router):
    dep = DEP.model_copy(update={"replicas": 3, "router": router})
    res = simulate(dep, requests(600, 5, 60.0))
    counts = np.bincount(res.replica_of, minlength=3)
    assert counts.sum() == 600 and counts.min() > 150
    assert res.completed.all()
    one = simulate(DEP, requests(600, 5, 60.0))
    # three replicas never give a worse median latency than one at the same traffic
    assert np.median(res.finish_s - res.requests.arrival_s) <= np.median(
        one.finish_s - one.requests.arrival_s)


def test_each_engine_holds_its_own_cuda_context():
    """TensorRT-LLM's process holds 774 MiB beside its engine, activations and buffers (the
    runtime log of its memory docs); an engine without a figure of its own (vLLM) holds the
    PyTorch CUDA context of the memory-overheads catalog. Both on one GPU, so no NCCL
    buffers."""
    catalog = load_catalog()
    context = catalog.memory_overheads.get("cuda-context").value
    trt = resolve(Deployment(model="llama-3.1-8b", gpu="h100", engine="tensorrt-llm")).memory
    vllm = resolve(Deployment(model="llama-3.1-8b", gpu="h100", engine="vllm")).memory
    assert trt.overhead_bytes == 774 * 2**20
    assert vllm.overhead_bytes == context == 400 * 2**20


@pytest.mark.parametrize("gpu, seqs", [("h100", 1024), ("h200", 1024), ("gh200-96gb", 1024),
                                       ("a100-sxm4-80gb", 384), ("a100-pcie-80gb", 384),
                                       ("l40s", 128), ("rtx-4090", 128)])
def test_lmdeploy_sets_its_batch_limit_by_device_name(gpu, seqs):
    """LMDeploy's get_max_batch_size: 'h100'/'h200' (which 'gh200' contains too) 1,024,
    'a100' 384, any other CUDA device 128; prefill takes 8,192 tokens per iteration."""
    catalog = load_catalog()
    engine = catalog.engines.get("turbomind")
    assert engine.name == "lmdeploy"
    assert engine.batch_limits(catalog.accelerators.get(gpu)) == (seqs, 8192)


def test_lmdeploy_gives_the_cache_its_share_of_free_memory():
    """cache_max_entry_count 0.8 of what the weights, buffers and context leave; vLLM's
    0.9 is of the whole device, so the two differ by the rule, not only the fraction."""
    mem = resolve(Deployment(model="llama-3.1-8b", gpu="h100", engine="lmdeploy")).memory
    free = mem.device_bytes - mem.weight_bytes - mem.activation_bytes - mem.overhead_bytes
    assert mem.kv_bytes == pytest.approx(0.8 * free)
    assert mem.block_size == 64


def test_a_preempted_sequence_waits_for_room_for_its_whole_recompute():
    """vLLM admits a waiting request only when blocks for its next chunk are free (V0's
    can_allocate with its watermark, V1's allocate_slots): a preempted sequence does not come
    back in pieces that fill the cache and get it preempted again. Llama 2 7B on a 40 GB A100
    holds about 11 sequences of 4,096 tokens; 16, 32 or 64 of them at once finish in waves,
    with fewer preemptions than sequences."""
    dep = Deployment(model="llama-2-7b", gpu="a100-sxm4-40gb", engine="vllm",
                     engine_version="0.5.4", weight_dtype="fp16")
    for n in (16, 32, 64):
        res = simulate(dep, Requests(np.zeros(n), np.full(n, 2048), np.full(n, 2048)))
        assert res.completed.all()
        assert 0 < res.preemptions.sum() < n
