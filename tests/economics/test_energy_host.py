"""An energy figure of the GPUs alone says so, and names the host draw it leaves out (an
audit read `plan train`'s 593,755 kWh for 2,048 H100 as the job's, about 45% under the
servers' maximum draw that `tco` counts)."""

from __future__ import annotations

import pytest

from infraplan.cli import main
from infraplan.economics.cost import CostInputs, unbilled_note
from infraplan.economics.energy import estimate_energy, host_note

EXAMPLE = "examples/train-llama-3.1-70b.yaml"


def test_the_gpus_alone_are_named_and_the_server_host_draw_offered():
    e = estimate_energy("h100", 16, 3600.0, utilization=1.0, pue=1.3)
    assert e.formula == "(16 x 700 W GPUs only) x 1 utilization x 1 h x PUE 1.3 = 14.56 kWh"
    assert e.host_note == (
        "the servers' own draw (CPUs, memory, NICs, fans) is not counted; set "
        "energy.host_w_per_node to add it (dgx-h100: 4,600 W, its 10,200 W maximum less "
        "8 x 700 W)")


def test_a_counted_host_leaves_no_note():
    e = estimate_energy("h100", 16, 3600.0, utilization=1.0, pue=1.3, host_w_per_node=4600.0)
    assert e.host_note == ""
    assert e.energy_kwh == pytest.approx((16 * 700 + 2 * 4600) * 1.3 / 1000)
    assert "GPUs only" not in e.formula


def test_the_offered_host_draw_is_the_accelerators_own_server():
    # dgx-a100-320gb: 6,500 W maximum, 8 x A100 40GB at 400 W
    assert host_note("a100-sxm4-40gb").endswith(
        "(dgx-a100-320gb: 3,300 W, its 6,500 W maximum less 8 x 400 W)")
    # no server row for the L40S: the DGX H100's host share as the example
    assert host_note("l40s").endswith("(a DGX H100's is 4,600 W)")


def test_plan_train_prints_what_its_cost_and_energy_leave_out(capsys):
    assert main(["plan", "train", EXAMPLE]) == 0
    lines = capsys.readouterr().out.splitlines()
    [energy] = [i for i, line in enumerate(lines) if line.startswith("energy (")]
    assert lines[energy].startswith("energy (2048 x 700 W GPUs only) x 1 utilization")
    assert lines[energy + 1].startswith("host: the servers' own draw")
    # the cost's one line, compute, then what it leaves unbilled (test_unbilled.py)
    assert lines[energy - 2].startswith("  compute (on-demand)")
    assert lines[energy - 1] == "  " + unbilled_note(CostInputs())
