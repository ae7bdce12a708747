"""One serving replica as a discrete-event simulation of continuous batching.

The scheduler follows vLLM's (Kwon et al. 2023, PagedAttention; vLLM V1 scheduler):
- Running sequences are served first, one token each per step; then waiting requests, in
  arrival order, get prefill tokens up to `max_num_batched_tokens` per step and
  `max_num_seqs` sequences in flight. With chunked prefill (Agrawal et al. 2024, Sarathi)
  a long prompt is cut into chunks that share steps with the decodes; without it a step is
  either all prefill (whole prompts) or all decode (vLLM V0's default). A request starts,
  or resumes after preemption, only when blocks for its whole chunk are free (V0's
  can_allocate, V1's allocate_slots), so it never re-enters in pieces that fill the cache.
- The KV cache is paged in blocks of `block_size` tokens. `on_demand`: a sequence takes a
  new block when its length crosses a block boundary; when none is free the most recently
  admitted sequence is preempted and later recomputed (its prompt plus what it generated).
  `reserve`: a request is admitted only when blocks for its whole prompt + output are free
  (TensorRT-LLM's GUARANTEED_NO_EVICT), so nothing is ever preempted.

Jumping between events: while no request arrives, finishes, is admitted or preempted, the
batch is fixed: n sequences each add one token per step, so step j costs a + b (C + n j)
(serving/step_time.py) and k steps cost k a + b (k C + n k (k - 1) / 2). The simulation
solves for the number of steps to the next event instead of looping token by token. Block
use is tracked exactly in O(block_size): a sequence of length L needs a new block in the
step that starts at L = 0 mod B; with g the replica's decode-step counter, (L - g) mod B is
fixed for a running sequence, so one histogram of that residue gives the blocks every
future step takes.
"""

from __future__ import annotations

import heapq
import math
from collections import deque

from infraplan.serving.request_book import (REFUSED_BUDGET, REFUSED_CONTEXT, REFUSED_KV,
                                            RequestBook)
from infraplan.serving.step_time import StepModel, steps_at_floor

INF = math.inf
WATERMARK_FRACTION = 0.01  # vLLM V0 BlockSpaceManager's default watermark (Replica)
TIMELINE_POINTS = 500


class Replica:
    """One engine; requests are indices into the shared per-request lists."""

    def __init__(self, step: StepModel, *, kv_blocks: int, block_size: int, max_num_seqs: int,
                 max_num_batched_tokens: int, chunked_prefill: bool, kv_policy: str,
                 requests: RequestBook, max_model_len: int | None = None):
        self.step, self.book = step, requests
        self.capacity, self.B = kv_blocks, block_size
        self.max_seqs, self.budget = max_num_seqs, max_num_batched_tokens
        self.chunked, self.reserve = chunked_prefill, kv_policy == "reserve"
        # Without chunked prefill a step is all prefill, so admission cannot set aside the
        # running decodes' next blocks: vLLM V0 keeps a watermark of free blocks instead
        # (block_manager.py, watermark=0.01: can_allocate admits a prompt only when
        # free - needed >= 1% of the blocks). Without it a preempted sequence is re-admitted
        # at once into the blocks it just freed and preempted again, step after step.
        self.watermark = 0 if chunked_prefill or self.reserve else \
            math.ceil(WATERMARK_FRACTION * kv_blocks)
        self.max_model_len = max_model_len  # None: the engine refuses no length
        self.now = 0.0
        self.g = 0  # decode steps run so far
        self.waiting: deque[int] = deque()
        self.done: dict[int, int] = {}  # prompt tokens prefilled so far (admitted requests)
        self.running: dict[int, tuple[int, int]] = {}  # rid -> (g at join, length at join)
        self.finish_heap: list[tuple[int, int]] = []  # (g at which it is done, rid)
        self.residue = [0] * block_size  # running sequences by (length - g) mod B
        self.ctx = 0  # cached tokens of the running sequences
        self.used = 0  # KV blocks in use
        self.reserved: dict[int, int] = {}  # reserve policy: blocks held per request
        self.steps = 0
        self.decode_steps = 0  # of them, decode steps (one a token under speculation)
        self.busy_s = 0.0
        self.block_seconds = 0.0  # integral of blocks in use over time
        self.peak_used = 0
        # requests not yet scheduled (in `waiting`, not in `done`: vLLM's
        # num_requests_waiting): their count and its peak. The integral of the count over
        # time is the sum of each wait, scheduled - queued: queuing subtracts its time,
        # scheduling adds its own (Little's law; nothing to do per step)
        self.unscheduled = 0
        self.peak_waiting = 0
        self.waiting_seconds = 0.0
        # (time, seconds waited so far, sequences running, blocks in use, block-seconds so
        # far) every so often, thinned to at most ~2 x TIMELINE_POINTS: the running totals
        # give the mean queue and KV use between any two samples (simulate._merge_timelines)
        self.timeline: list[tuple[float, float, int, int, float]] = []
        # decode step cost by batch: a + b x ctx, at least floor
        self.coefficients: dict[int, tuple[float, float, float]] = {}
        self.sample_every_s = 0.0
        self.next_sample_s = 0.0

    # ------------------------------------------------------------------ interface
    @property
    def outstanding(self) -> int:
        return len(self.waiting) + len(self.running)

    def submit(self, rid: int, arrival_s: float | None = None) -> None:
        """Take request `rid`, which arrived at `arrival_s` (None: now); a step under way
        when it arrived ended at `now`, and it waited from its arrival."""
        book = self.book
        # a request that could not finish even alone is refused (vLLM refuses a context
        # longer than the cache holds: max_model_len)
        length = book.prompt[rid] + book.output[rid]
        if self.max_model_len is not None and length > self.max_model_len:
            book.drop(rid, REFUSED_CONTEXT.format(self.max_model_len))
        elif self._blocks(length) > self.capacity:
            book.drop(rid, REFUSED_KV)
        elif not self.chunked and book.prompt[rid] > self.budget:
            book.drop(rid, REFUSED_BUDGET)
        else:
            self.waiting.append(rid)
            self.waiting_seconds -= self.now if arrival_s is None else arrival_s
            queued = self.unscheduled = self.unscheduled + 1
            if queued > self.peak_waiting:
                self.peak_waiting = queued

    def run_until(self, t_limit: float) -> None:
        """Run every step that starts before `t_limit` (inf: until all work is done)."""
        while self.now < t_limit:
            if self.waiting and self._admissible():
                self._mixed_step()
                continue
            if not self.running:
                if self.waiting:  # blocks held by partial prefills: recompute the newest
                    self._evict_partial()
                    continue
                if t_limit == INF:
                    return
                self.now = t_limit  # idle until the next arrival
                return
            self._decode_jump(t_limit)

    def blocks_by_sequence(self) -> int:
        """Blocks in use recounted from every sequence's length (a check of `used`)."""
        if self.reserve:
            return sum(self.reserved.values())
        return sum(self._blocks(self._length(rid)) for rid in self.running) + sum(
            self._blocks(done) for done in self.done.values())

    # ------------------------------------------------------------------ blocks
    def _blocks(self, tokens: int) -> int:
        return -(-tokens // self.B)

    def _new_blocks(self, k: int) -> int:
        """Blocks the running sequences take over the next k decode steps."""
        B, res, g = self.B, self.residue, self.g
        full, part = divmod(k, B)
        total = full * len(self.running)
        for j in range(part):
            total += res[(-(g + j)) % B]
        return total

    def _steps_until_full(self, limit: int) -> int:
        """Decode steps (<= limit) that fit in the free blocks."""
        free = self.capacity - self.used
        n = len(self.running)
        B, res, g = self.B, self.residue, self.g
        cycles = min(free // n, limit // B) if n else limit // B
        k, free = cycles * B, free - cycles * n
        while k < limit:
            need = res[(-(g + k)) % B]
            if need > free:
                return k
            free -= need
            k += 1
        return k

    # ------------------------------------------------------------------ steps
    def _admissible(self) -> bool:
        rid = self.waiting[0]
        if rid in self.done:
            return True
        if len(self.running) + len(self.done) >= self.max_seqs:
            return False
        book = self.book
        if self.reserve:
            need = self._blocks(book.prompt[rid] + book.output[rid])  # as _mixed_step reserves
        else:
            need = 1 + self._new_blocks(1) if self.running else 1
        return self.used + need + self.watermark <= self.capacity

    def _mixed_step(self) -> None:
        book, step, B = self.book, self.step, self.B
        running, done_of, reserve = self.running, self.done, self.reserve
        preempted = False
        if not reserve and running and self.chunked:
            while running and self.used + self.residue[(-self.g) % B] > self.capacity:
                self._preempt()
                preempted = True
        n = len(running) if self.chunked else 0
        # the decodes' next blocks come first; a step that had to preempt admits nothing
        # new (vLLM V1 skips the waiting queue after a preemption)
        decode_blocks = self.residue[(-self.g) % B] if n and not reserve else 0
        budget = 0 if preempted else self.budget - n
        chunks: list[tuple[int, int, int]] = []  # (request, tokens before, chunk)
        tokens = pairs = finishing = 0
        held_before = len(done_of)  # the loop adds the requests it schedules to done_of
        prompt_of, generated = book.prompt, book.generated
        for rid in self.waiting:
            if budget <= 0:
                break
            done = done_of.get(rid)
            if done is None:
                if len(running) + len(done_of) >= self.max_seqs:
                    break
                done = 0
            prompt = prompt_of[rid] + generated[rid]
            chunk = min(prompt - done, budget)
            if not self.chunked and chunk < prompt - done:
                if chunks:
                    break
                chunk = prompt - done  # a recomputed prompt outgrew the budget: alone
            free = self.capacity - self.used - decode_blocks - self.watermark
            held = -(-done // B)
            if reserve:
                need = 0 if rid in self.reserved else -(-(prompt_of[rid] + book.output[rid])
                                                       // B)
            else:
                need = -(-(done + chunk) // B) - held
            if chunk <= 0 or need > free:
                break
            self.used += need
            if reserve and need:
                self.reserved[rid] = need
            done_of[rid] = done
            chunks.append((rid, done, chunk))
            tokens += chunk
            pairs += chunk * done + chunk * (chunk + 1) // 2
            budget -= chunk
            finishing += done + chunk == prompt
        admitted = len(done_of) - held_before
        if admitted:  # scheduled now, at the step's start
            self.waiting_seconds += admitted * self.now
            self.unscheduled -= admitted
        if not chunks:  # the head could not start after all (decodes took its blocks)
            if running:
                self._decode_jump(INF, max_steps=1)
            else:
                self._evict_partial()
            return
        self.used += decode_blocks
        self._advance_clock(step.time(tokens, n, n + finishing, pairs, self.ctx + n))
        if n:
            self.g += 1
            self.ctx += n
        now, waiting = self.now, self.waiting
        for rid, done, chunk in chunks:
            done += chunk
            prompt = prompt_of[rid] + generated[rid]
            if done < prompt:
                done_of[rid] = done
                continue
            del done_of[rid]
            if waiting[0] == rid:
                waiting.popleft()
            else:
                waiting.remove(rid)
            book.first_token(rid, now)
            if generated[rid] >= book.output[rid]:
                self._release(rid, prompt)
                book.finish(rid, now)
            else:
                self._join(rid, prompt)
        if self.finish_heap and self.finish_heap[0][0] <= self.g:
            self._pop_finished()

    def _decode_jump(self, t_limit: float, max_steps: int | None = None) -> None:
        running = self.running
        n = len(running)
        heap, output, generated = self.finish_heap, self.book.output, self.book.generated
        while True:  # drop stale entries (sequences preempted since they were pushed)
            at, rid = heap[0]
            entry = running.get(rid)
            if entry is not None and entry[0] + output[rid] - generated[rid] == at:
                break
            heapq.heappop(heap)
        k = at - self.g
        if max_steps is not None and max_steps < k:
            k = max_steps
        coefficients = self.coefficients.get(n)
        if coefficients is None:
            coefficients = self.coefficients[n] = (*self.step.decode_coefficients(n),
                                                   self.step.floor_s(n))
        a, b, floor = coefficients
        c = self.ctx + n  # each step reads the cache including the token it appends
        host_bound = floor > a + b * c  # the common case (no floor) costs one comparison
        if host_bound:
            # Each step lasts the host's floor until the growing cache makes the GPU's time
            # the longer: jump over those steps alone, at floor each.
            k = min(k, steps_at_floor(a, b, floor, c, n))
            if t_limit < INF:
                m = math.ceil((t_limit - self.now) / floor - 1e-9)
                k = min(k, max(m, 1))
        elif t_limit < INF:
            # smallest m with m a + b (m c + n m (m - 1) / 2) >= t_limit - now
            gap = t_limit - self.now
            qa, qb = b * n / 2.0, a + b * c - b * n / 2.0
            m = gap / qb if qa * gap < 1e-9 * qb * qb else \
                (-qb + math.sqrt(qb * qb + 4 * qa * gap)) / (2 * qa)
            m = math.ceil(m - 1e-9)
            if m < k:
                k = m if m > 1 else 1
        if not self.reserve:
            # n blocks per B steps bound what k steps take; only near a full cache is the
            # exact step count needed
            if (self.capacity - self.used) < n * (k // self.B + 1):
                k = self._steps_until_full(k)
                if k == 0:
                    self._preempt()
                    return
            self.used += self._new_blocks(k)
        self._advance_clock(k * floor if host_bound
                            else k * a + b * (k * c + n * k * (k - 1) / 2.0), steps=k)
        self.decode_steps += k
        self.g += k
        self.ctx += n * k
        if heap[0][0] <= self.g:
            self._pop_finished()

    # ------------------------------------------------------------------ bookkeeping
    def _advance_clock(self, dt: float, steps: int = 1) -> None:
        self.block_seconds += self.used * dt
        if self.used > self.peak_used:
            self.peak_used = self.used
        self.now += dt
        self.busy_s += dt
        self.steps += steps
        if self.now >= self.next_sample_s:
            self._sample()

    def _requeue(self, delta: int) -> None:
        """`delta` requests rejoin the unscheduled now (preempted, or a partial prefill
        given back), or one leaves it unscheduled (dropped: its wait ends now)."""
        self.waiting_seconds -= delta * self.now
        self.unscheduled += delta
        self.peak_waiting = max(self.peak_waiting, self.unscheduled)

    def _sample(self) -> None:
        timeline = self.timeline
        timeline.append((self.now, self.waiting_seconds + self.unscheduled * self.now,
                         len(self.running), self.used, self.block_seconds))
        if len(timeline) >= 2 * TIMELINE_POINTS:  # keep every other point, sample half as often
            del timeline[1::2]
            self.sample_every_s = 2 * self.sample_every_s or self.now / TIMELINE_POINTS
        self.next_sample_s = self.now + self.sample_every_s

    def _join(self, rid: int, length: int) -> None:
        book = self.book
        self.running[rid] = (self.g, length)
        self.residue[(length - self.g) % self.B] += 1
        self.ctx += length
        heapq.heappush(self.finish_heap,
                       (self.g + book.output[rid] - book.generated[rid], rid))

    def _length(self, rid: int) -> int:
        g0, length0 = self.running[rid]
        return length0 + self.g - g0

    def _leave(self, rid: int) -> int:
        length = self._length(rid)
        g0, length0 = self.running.pop(rid)
        self.residue[(length0 - g0) % self.B] -= 1
        self.ctx -= length
        return length

    def _release(self, rid: int, length: int) -> None:
        self.used -= self.reserved.pop(rid) if self.reserve else self._blocks(length)

    def _pop_finished(self) -> None:
        heap, g, book, now = self.finish_heap, self.g, self.book, self.now
        while heap and heap[0][0] <= g:
            at, rid = heapq.heappop(heap)
            if not self._valid(at, rid):
                continue  # a stale entry of a preempted sequence
            g0 = self.running[rid][0]
            book.generated[rid] += g - g0
            length = self._leave(rid)
            self._release(rid, length)
            book.finish(rid, now)

    def _valid(self, at: int, rid: int) -> bool:
        entry = self.running.get(rid)
        return entry is not None and entry[0] + self.book.output[rid] \
            - self.book.generated[rid] == at

    def _evict_partial(self) -> None:
        """Nothing decodes and the queue did not move: a partial prefill behind the head
        gives its blocks back (recomputed later). With every block free and the head still
        unable to start, it never will: it is dropped."""
        head = self.waiting[0]
        partial = [rid for rid in self.waiting if rid in self.done and rid != head]
        if partial:
            rid = partial[-1]
            self.used -= self.reserved.pop(rid, 0) if self.reserve else self._blocks(
                self.done[rid])
            del self.done[rid]
            self.book.preempt(rid)
            self._requeue(1)
        elif self.used == 0:
            self.waiting.popleft()
            self.book.drop(head, "does not fit in the KV cache")
            self._requeue(-1)

    def _preempt(self) -> None:
        """Free the most recently admitted sequence; it is recomputed later (vLLM's
        preemption by recompute)."""
        rid = next(reversed(self.running))
        g0 = self.running[rid][0]
        self.book.generated[rid] += self.g - g0
        length = self._leave(rid)
        self._release(rid, length)
        self.book.preempt(rid)
        self.waiting.appendleft(rid)
        self._requeue(1)
