"""infraplan tco: the CLI prints the library's on-prem cost and break-evens."""

from __future__ import annotations

import json

import pytest

from infraplan.cli import main
from infraplan.economics.tco import buy_vs_rent, onprem_cost, self_host_vs_api


def test_tco_json_is_the_library(capsys):
    assert main(["tco", "dgx-h100", "--utilization", "0.6", "--rent", "3.5",
                 "--api-usd-per-m", "2.0", "--tokens-per-s", "20000", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    own = onprem_cost("dgx-h100", 0.6)
    assert data["onprem"]["usd_per_gpu_hour"] == pytest.approx(own.usd_per_gpu_hour)
    assert data["buy_vs_rent"]["months"] == pytest.approx(
        buy_vs_rent("dgx-h100", 0.6, 3.5).months)
    api = self_host_vs_api(20000, own.usd_per_year / 12, 2.0)
    assert data["self_host_vs_api"]["tokens_per_month"] == pytest.approx(api.tokens_per_month)


@pytest.mark.parametrize("argv, needle", [
    (["tco", "dgx-h10"], "did you mean 'dgx-h100'"),
    # the flags are named, not the library's parameters (rent_usd_per_gpu_hour)
    (["tco", "dgx-h100", "--rent", "-1"], "argument --rent: must be a finite number >= 0"),
    (["tco", "dgx-h100", "--utilization", "1.5"],
     "argument --utilization: must be a finite number > 0 and <= 1, got 1.5"),
    (["tco", "dgx-h100", "--years", "0"], "argument --years: must be a finite number > 0"),
    (["tco", "dgx-h100", "--tokens-per-s", "nan", "--api-usd-per-m", "1"],
     "argument --tokens-per-s: must be a finite number > 0, got nan"),
    (["tco", "dgx-h100", "--api-usd-per-m", "1"],
     "--api-usd-per-m needs --tokens-per-s: self-hosting vs an API compares"),
    # the throughput alone was ignored without a word
    (["tco", "dgx-h100", "--tokens-per-s", "1000"], "--tokens-per-s needs --api-usd-per-m"),
])
def test_tco_bad_input_exits_2(capsys, argv, needle):
    try:
        code = main(argv)
    except SystemExit as exit_info:  # argparse's own check of a flag's value
        code = exit_info.code
    assert code == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1
