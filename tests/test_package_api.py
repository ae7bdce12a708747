"""The top-level names a Python user reaches for, and that `import infraplan` stays cheap."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import infraplan

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_every_exported_name_resolves_to_its_defining_object():
    from infraplan.training.plan_train import plan_training

    for name in infraplan.__all__:
        assert getattr(infraplan, name) is not None, name
    assert infraplan.plan_training is plan_training
    assert set(dir(infraplan)) == set(infraplan.__all__)


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'plan_trainig'"):
        infraplan.plan_trainig  # noqa: B018


def test_importing_the_package_loads_nothing_heavy():
    """The CLI starts from `import infraplan`: numpy, pydantic and the catalog load only
    when a name is used."""
    code = ("import sys, infraplan; "
            "print(sorted(m for m in ('numpy', 'pydantic', 'yaml', 'torch') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


def test_the_docstring_example_plans_a_model():
    arch = infraplan.load_model("llama-3.1-70b")
    assert infraplan.param_counts(arch).total == 70_553_706_496


def test_short_repr_summarises_arrays_and_long_numeric_lists():
    from infraplan.reprs import short

    assert short(np.array([np.nan, 0.5, 3.25])) == "<array of 3 float64, 0.5 to 3.25>"
    assert short(np.zeros((2, 3), dtype=np.int64)) == "<array of 2 x 3 int64, 0 to 0>"
    assert short(np.array([])) == "<array of 0 float64>"
    assert short(list(range(9))) == "<list of 9 numbers, 0 to 8>"
    assert short([1, 2, 3]) == "[1, 2, 3]"  # short lists print in full
    assert short({"queue": np.arange(4)}) == "{'queue': <array of 4 int64, 0 to 3>}"
    assert short("text") == "'text'"
    # in a result's JSON, a long formula or source prints its start and its length
    assert short({"source": "x" * 200, "n": [1], "s": 0.04695184760502092}) == \
        "{'source': '" + "x" * 60 + "...' (200 characters), 'n': [1], 's': 0.0469518}"
    assert short("x" * 200) == repr("x" * 200)  # a text field of its own prints whole


def test_results_print_in_a_few_lines_at_the_repl():
    """A simulation holds one number per request and a step model one per batch size; the
    default dataclass repr printed them all (3.4 MB for the chat example's serving plan)."""
    serve = infraplan.load_scenario(EXAMPLES / "serve-llama8b-chat.yaml", infraplan.ServeScenario)
    requests = infraplan.generate(serve.traffic, seed=0)
    assert repr(requests).startswith("Requests(arrival_s=<array of 3000 float64, 0")
    result = infraplan.simulate(serve.deployment_spec(), requests)
    text = repr(result)
    assert len(text) < 20_000 and "first_token_s=<array of 3000 float64" in text
    assert "linear_s=<list of " in repr(result.replica.step)
    plan = infraplan.plan_serving(serve)
    assert "resolved=" not in repr(plan.best)  # the step-model cache stays out
    assert len(repr(plan)) < 3_000 * (len(plan.ranked) + len(plan.rejected) + 1)

    train = infraplan.load_scenario(EXAMPLES / "train-llama-3.1-70b.yaml",
                                    infraplan.TrainScenario)
    run = infraplan.simulate_training_run(train, infraplan.plan_training(train).best[0])
    trials = next(iter(run.strategies.values())).trials
    assert f"wall_s=<array of {trials} float64" in repr(run)
    assert len(repr(run)) < 20_000
