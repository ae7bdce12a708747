"""Shared fixtures. Tests that need torch or transformers skip cleanly when they are absent
only if INFRAPLAN_ALLOW_SKIP=1; `make test` installs both, so there they always run."""

from __future__ import annotations

import os

import pytest


def require(module: str):
    """Import an optional test dependency; fail (not skip) unless skipping is allowed."""
    if os.environ.get("INFRAPLAN_ALLOW_SKIP") == "1":
        return pytest.importorskip(module)
    import importlib

    return importlib.import_module(module)
