"""The simulated requests' inputs and outcomes, shared by a run's replicas, and the reasons
an engine refuses a request on arrival."""

from __future__ import annotations

import math
from array import array
from collections.abc import Sequence

# why a request is refused on arrival (metrics.require_completions pairs each with its fix)
REFUSED_CONTEXT = "prompt + output longer than the model's {:,}-token context"
REFUSED_KV = "prompt + output longer than the KV cache holds"
REFUSED_BUDGET = "prompt longer than max_num_batched_tokens without chunked prefill"


class RequestBook:
    """Per-request inputs and outcomes, shared by the replicas. The simulator reads and
    writes them one element at a time, so they are flat arrays of machine numbers (the
    array module: indexed as fast as a list, 8 bytes an element where a list of distinct
    floats or ints takes about 32-36)."""

    def __init__(self, prompt: Sequence[int], output: Sequence[int]):
        n = len(prompt)
        self.prompt, self.output = array("q", prompt), array("q", output)
        self.generated = array("q", [0]) * n  # tokens generated before this admission
        self.first_token_s = array("d", [math.nan]) * n
        self.finish_s = array("d", [math.nan]) * n
        self.preemptions = array("q", [0]) * n
        self.dropped: dict[int, str] = {}

    def first_token(self, rid: int, t: float) -> None:
        if self.first_token_s[rid] != self.first_token_s[rid]:  # NaN: the first time
            self.first_token_s[rid] = t
        self.generated[rid] += 1

    def finish(self, rid: int, t: float) -> None:
        self.finish_s[rid] = t

    def preempt(self, rid: int) -> None:
        self.preemptions[rid] += 1

    def drop(self, rid: int, reason: str) -> None:
        self.dropped[rid] = reason
