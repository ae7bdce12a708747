"""infraplan tco: the CLI prints the library's on-prem cost and break-evens."""

from __future__ import annotations

import json

import pytest

from infraplan.cli import main
from infraplan.economics.tco import buy_vs_rent, onprem_cost, server_vs_api


def test_tco_json_is_the_library(capsys):
    assert main(["tco", "dgx-h100", "--utilization", "0.6", "--rent", "3.5",
                 "--api-usd-per-m", "2.0", "--tokens-per-s", "20000", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    own = onprem_cost("dgx-h100", 0.6)
    assert data["onprem"]["usd_per_gpu_hour"] == pytest.approx(own.usd_per_gpu_hour)
    assert data["buy_vs_rent"]["months"] == pytest.approx(
        buy_vs_rent("dgx-h100", 0.6, 3.5).months)
    api = server_vs_api("dgx-h100", 20000, 2.0)  # the load solved for, not --utilization
    assert data["self_host_vs_api"]["tokens_per_month"] == pytest.approx(api.tokens_per_month)
    assert data["onprem"]["price"]["estimate"] is True
    assert data["onprem"]["price"]["source"].startswith("Price: SemiAnalysis")
    assert data["onprem"]["price"]["retrieved"] == "2026-11-22"
    assert data["onprem"]["electricity_region"] == "us-industrial-average"
    assert data["onprem"]["excludes"].startswith("cost of capital, residual value")


@pytest.mark.parametrize("argv, needle", [
    (["tco", "dgx-h10"], "did you mean 'dgx-h100'"),
    # the flags are named, not the library's parameters (rent_usd_per_gpu_hour)
    (["tco", "dgx-h100", "--rent", "-1"], "argument --rent: must be a finite number >= 0"),
    (["tco", "dgx-h100", "--utilization", "1.5"],
     "argument --utilization: must be a finite number >= 0.01 and <= 1, got 1.5"),
    # the help said (0-1] and the library refused 0.001 with "between 0.01 and 1"
    (["tco", "dgx-h100", "--utilization", "0.001"],
     "argument --utilization: must be a finite number >= 0.01 and <= 1, got 0.001"),
    (["tco", "dgx-h100", "--years", "0"],
     "argument --years: must be a finite number >= 0.25 and <= 30, got 0"),
    (["tco", "dgx-h100", "--price-usd-per-server", "0"],
     "argument --price-usd-per-server: must be a finite number > 0, got 0"),
    (["tco", "dgx-h100", "--pue", "0.9"], "argument --pue: must be a finite number >= 1"),
    (["tco", "dgx-h100", "--operations-fraction", "inf"],
     "argument --operations-fraction: must be a finite number >= 0 and <= 1, got inf"),
    (["tco", "dgx-h100", "--region", "tx", "--usd-per-kwh", "0.1"],
     "--region and --usd-per-kwh both set the electricity price"),
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


def _text(capsys, *argv):
    assert main(["tco", *argv]) == 0
    return " ".join(capsys.readouterr().out.split())  # wrapped lines joined


def test_api_break_even_ignores_utilization_and_counts_power_at_full_load(capsys):
    """It read 34.9% (35.8% with --utilization 1) and '$0.6976 per million' at full load."""
    for u in ("0.7", "1"):
        out = _text(capsys, "dgx-h100", "--api-usd-per-m", "2", "--tokens-per-s", "5000",
                    "--utilization", u)
        assert ("self-host vs API at $2.00 per million tokens: self-hosting is cheaper above "
                "4.45 billion tokens/month (33.8% of its capacity)") in out
    out = _text(capsys, "dgx-h100", "--api-usd-per-m", "0.5", "--tokens-per-s", "5000")
    assert ("never: even at full load (13.2 billion tokens/month) self-hosting costs $0.72 per "
            "million tokens, more than the API's $0.50") in out
    assert "e+" not in out
    out = _text(capsys, "dgx-h100", "--api-usd-per-m", "0.126", "--tokens-per-s", "5000")
    # the user's own price as given (s63; aba596b had rounded it to $0.13)
    assert "self-host vs API at $0.126 per million tokens: never" in out


def test_the_price_says_it_is_an_estimate_and_can_be_replaced(capsys):
    out = _text(capsys, "dgx-h100")
    assert ("price: $270,000 a server (estimate: Analyst estimate of a 2023 sale price, not a "
            "list price; set --price-usd-per-server for your quote) source: Price: SemiAnalysis"
            ) in out
    assert "(us-industrial-average, 2023)" in out  # the region beside its $0.0806/kWh
    assert ("not included: cost of capital, residual value, and cluster switches, cables, "
            "racks and storage systems") in out
    out = _text(capsys, "dgx-h100", "--price-usd-per-server", "317000", "--pue", "1.5",
                "--usd-per-kwh", "0.1", "--colocation-usd-per-kw-month", "200",
                "--operations-fraction", "0.08", "--years", "5")
    assert "price: $317,000 a server (given with --price-usd-per-server)" in out
    assert ("set on the command line: --price-usd-per-server 317,000, --years 5, --pue 1.5, "
            "--usd-per-kwh 0.1, --colocation-usd-per-kw-month 200, --operations-fraction 0.08"
            ) in out
    # $317,000 / 5 + 10.2 kW x 0.7 x 8,766.72 h x 1.5 x $0.10 + $200 x 10.2 x 12 + 8% x $317,000
    assert "$63,400 $317,000 / 5 years" in out and "$9,389 (8 x 700 W" in out
    assert "$24,480 $200.00/kW-month" in out and "$25,360 0.08 x $317,000" in out


def test_rent_cheaper_reads_as_such(capsys):
    out = _text(capsys, "dgx-h100", "--rent", "2")
    assert ("buy vs rent at $2.00 per GPU-hour: renting is cheaper: buying would pay off after "
            "58.3 months (238,406 GPU-hours), beyond the assumed 4-year life") in out


def test_quiet_keeps_both_verdicts(capsys):
    assert main(["tco", "dgx-h100", "--rent", "3", "--api-usd-per-m", "2", "--tokens-per-s",
                 "5000", "-q"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "; rent: buying pays off after " in out
    assert out.rstrip().endswith("; API: self-hosting is cheaper above 4.45 billion "
                                 "tokens/month (33.8% of its capacity)")


def test_help_states_defaults_ranges_and_regions(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "300")  # argparse wraps there: no hyphen split
    with pytest.raises(SystemExit):
        main(["tco", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    for fragment in ("0.01 to 1 (default: 0.7)", "0.25 to 30 years (default: 4)",
                     "(default: us-industrial-average); one of california, georgia,",
                     "1 to 3; real data centres run 1.1 to 2.0 (default: 1.3)",
                     "(default: 184.06)", "0 to 1: 0.05 is 5 % (default: 0.05)"):
        assert fragment in out
