"""simulate serve printed '$1.20 per GPU-hour, 3 GPUs' and never said it was Azure's 8-GPU
spot instance ($3.6047/h) spread over the 3 GPUs used; `report` said so, the terminal and
--json did not (finance audit, 2026-11)."""

from __future__ import annotations

import json

import pytest
import yaml

from infraplan.cli import main

SCENARIO = {
    "model": "llama-3.1-8b", "name": "a100_tp1_r3_spot", "seed": 1,
    "traffic": {"arrival": {"kind": "poisson", "rate_per_s": 20}, "num_requests": 300,
                "input": {"kind": "lognormal", "mean": 1000, "sigma": 0.8, "max": 16000},
                "output": {"kind": "lognormal", "mean": 250, "sigma": 0.8, "max": 4000}},
    "deployment": {"gpu": "a100-sxm4-80gb", "tp": 1, "replicas": 3, "weight_dtype": "fp8"},
    "pricing": "spot"}
CATALOG_BASIS = ("cheapest spot offer: azure Standard_ND96amsr_A100_v4 (eastus, 2024-08); "
                 "whole 8-GPU instances billed, 8 GPUs at $0.45/GPU-h for the 3 used; set "
                 "prices: {a100-sxm4-80gb: ...} for yours")


def _run(tmp_path, capsys, *flags, **extra):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({**SCENARIO, **extra}))
    assert main(["simulate", "serve", str(path), *flags]) == 0
    return capsys.readouterr().out


def test_the_terminal_line_says_where_the_price_comes_from(tmp_path, capsys):
    out = _run(tmp_path, capsys)
    assert f"($1.20 per GPU-hour, 3 GPUs; {CATALOG_BASIS})" in out


def test_the_json_cost_carries_the_price_basis(tmp_path, capsys):
    cost = json.loads(_run(tmp_path, capsys, "--json"))["cost"]
    # 8 x $0.4506/GPU-h (Azure's $3.6047 instance-hour) over the 3 GPUs used
    assert cost["usd_per_gpu_hour"] == pytest.approx(3.6047 / 3, rel=1e-4)
    assert cost["price_basis"] == CATALOG_BASIS
    own = json.loads(_run(tmp_path, capsys, "--json", prices={"a100": 1.5}))["cost"]
    assert own["usd_per_gpu_hour"] == 1.5
    assert own["price_basis"] == ("the scenario's price, per GPU used: whole instances are "
                                  "billed only for catalog offers")
