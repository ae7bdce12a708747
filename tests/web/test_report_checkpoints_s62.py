"""The training report's goodput curve starts at the shortest interval a checkpoint can take
(its upload, since one starts only once the last is durable): it began at the 2.6 s the
asynchronous copy blocks, under the text's own 1.32 min floor, with hovers 'every 0.0 min'."""

from __future__ import annotations

import pytest

from tests.web.conftest import EXAMPLES


@pytest.fixture(scope="module")
def llama_doc():
    from infraplan.report.document import build_document

    return build_document(EXAMPLES / "train-llama-3.1-70b.yaml")


def test_the_goodput_curve_starts_at_the_upload(llama_doc):
    k = llama_doc["checkpoints"]
    assert k["asynchronous"] and k["blocking_s"] < k["write_s"] / 10
    curve, used = llama_doc["figures"]["goodput"]["data"][:2]
    assert curve["x"][0] == pytest.approx(k["write_s"] / 60)
    assert curve["x"][0] == pytest.approx(used["x"][0])  # the interval used is the upload
    assert "%{x:.3g} min" in curve["hovertemplate"]
