"""The top-level names a Python user reaches for, and that `import infraplan` stays cheap."""

from __future__ import annotations

import subprocess
import sys

import pytest

import infraplan


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
