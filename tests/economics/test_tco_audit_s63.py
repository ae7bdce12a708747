"""s63 audit of `infraplan tco`: a fraction written as a percentage (--operations-fraction 5
priced 500 % of the server a year, $29.47/GPU-h) and an impossible PUE (--pue 50) were
accepted; the JSON lacked inputs the text shows; the text rounded the user's own rent."""

from __future__ import annotations

import json

import pytest

from infraplan.cli import main
from infraplan.economics.cost import SECONDS_PER_MONTH
from infraplan.economics.tco import onprem_cost, self_host_vs_api
from infraplan.errors import InputError


def _run(capsys, *argv) -> tuple[int, str, str]:
    try:
        code = main(["tco", *argv])
    except SystemExit as exit_info:  # argparse's own check of a flag's value
        code = exit_info.code
    out, err = capsys.readouterr()
    return code, " ".join(out.split()), err


@pytest.mark.parametrize("argv, needle", [
    (["--operations-fraction", "5"],
     "argument --operations-fraction: must be a finite number >= 0 and <= 1, got 5. To fix: "
     "give a fraction of the server price a year: write 0.05 for 5 %"),
    (["--operations-fraction", "1.01"],
     "argument --operations-fraction: must be a finite number >= 0 and <= 1, got 1.01."),
    (["--pue", "50"],
     "argument --pue: must be a finite number >= 1 and <= 3, got 50. To fix: give facility "
     "kWh per IT kWh, 1 to 3: real data centres run 1.1 to 2.0"),
    (["--pue", "3.01"], "argument --pue: must be a finite number >= 1 and <= 3, got 3.01."),
    # already refused, but without saying that 70 meant 0.7
    (["--utilization", "70"],
     "argument --utilization: must be a finite number >= 0.01 and <= 1, got 70. To fix: "
     "give a share of the year's hours: write 0.7 for 70 %"),
])
def test_a_percentage_or_an_impossible_pue_is_refused_with_the_fix(capsys, argv, needle):
    code, out, err = _run(capsys, "dgx-h100", *argv)
    assert (code, out) == (2, "")
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err


def test_the_library_refuses_them_too_and_takes_the_bounds():
    for kw, needle in (({"operations_fraction_per_year": 5},
                        "operations_fraction_per_year (tco --operations-fraction) must be "
                        "between 0 and 1 (got 5). To fix: give a fraction of the server price "
                        "a year: write 0.05 for 5 %"),
                       ({"pue": 50}, "pue (tco --pue) must be between 1 and 3 (got 50). To "
                                     "fix: give facility kWh per IT kWh, 1 to 3: real data "
                                     "centres run 1.1 to 2.0")):
        with pytest.raises(InputError) as info:
            onprem_cost("dgx-h100", 0.7, **kw)
        assert str(info.value) == needle
    edge = onprem_cost("dgx-h100", 0.7, pue=3.0, operations_fraction_per_year=1.0)
    assert (edge.pue, edge.operations_fraction_per_year) == (3.0, 1.0)
    assert dict((i.name, i.usd) for i in edge.items)["operations"] == pytest.approx(270_000)


def test_help_states_the_pue_and_operations_ranges(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "300")  # argparse wraps there: no hyphen split
    with pytest.raises(SystemExit):
        main(["tco", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "facility kWh per IT kWh, 1 to 3; real data centres run 1.1 to 2.0 (default: 1.3)" \
        in out
    assert ("staff, support and spares a year as a fraction of the price, 0 to 1: 0.05 is 5 % "
            "(default: 0.05)") in out


def test_json_holds_the_inputs_the_text_shows(capsys):
    code, out, _ = _run(capsys, "dgx-h100", "--rent", "2.69", "--api-usd-per-m", "2",
                        "--tokens-per-s", "5000", "--json")
    data = json.loads(out)
    assert code == 0
    assert data["buy_vs_rent"]["rent_usd_per_gpu_hour"] == 2.69
    assert data["buy_vs_rent"]["months"] == pytest.approx(36.2115, abs=1e-4)  # kept
    assert data["onprem"]["colocation_usd_per_kw_month"] == 184.06
    assert data["onprem"]["operations_fraction_per_year"] == 0.05
    assert data["self_host_vs_api"]["tokens_per_s"] == 5000
    assert data["self_host_vs_api"]["capacity_tokens_per_month"] == pytest.approx(
        5000 * SECONDS_PER_MONTH)  # kept
    code, out, _ = _run(capsys, "dgx-h100", "--colocation-usd-per-kw-month", "200",
                        "--operations-fraction", "0.08", "--json")
    data = json.loads(out)
    assert (data["onprem"]["colocation_usd_per_kw_month"],
            data["onprem"]["operations_fraction_per_year"]) == (200, 0.08)


def test_the_users_own_prices_are_echoed_as_given(capsys):
    for rent, shown in (("6.155", "$6.155"), ("2.69", "$2.69"), ("3", "$3.00"),
                        ("0.125", "$0.125")):
        code, out, _ = _run(capsys, "dgx-h100", "--rent", rent)
        assert code == 0 and f"buy vs rent at {shown} per GPU-hour: " in out
    code, out, _ = _run(capsys, "dgx-h100", "--api-usd-per-m", "0.126", "--tokens-per-s", "5000")
    assert "self-host vs API at $0.126 per million tokens: never" in out
    assert "self-hosting costs $0.72 per million tokens, more than the API's $0.126" in out


def test_the_self_host_figure_never_reads_as_no_dearer_than_the_api():
    """To the cent $0.1249 read $0.12, 'more than the API's $0.12' (now $0.1245, as given)."""
    one_million_tokens_a_month = 1e6 / SECONDS_PER_MONTH  # tokens/s
    result = self_host_vs_api(one_million_tokens_a_month, 0.1249, 0.1245)
    assert result.tokens_per_month is None and result.tokens_per_s == one_million_tokens_a_month
    assert result.message.endswith(
        "self-hosting costs $0.1249 per million tokens, more than the API's $0.1245")
