"""`infraplan catalog servers|regions` list what `tco` prices; a typo of a listing's name
gets a close match; the GPU table says its TFLOP/s are dense."""

from __future__ import annotations

import json

import pytest

from infraplan.cli import main


def _run(capsys, *argv):
    try:
        code = main(["catalog", *argv])
    except SystemExit as exit_info:  # argparse's own check
        code = exit_info.code
    out, err = capsys.readouterr()
    return code, out, err


def test_catalog_servers_flags_estimated_prices(capsys):
    code, out, _ = _run(capsys, "servers")
    lines = out.splitlines()
    assert code == 0 and lines[0].split() == ["name", "accelerator", "GPUs", "price", "$",
                                              "system", "power", "W", "estimate", "retrieved"]
    assert lines[2].split() == ["dgx-h100", "h100-sxm5-80gb", "8", "270,000", "10,200", "yes",
                                "2026-11-22"]
    assert lines[4].split() == ["dgx-a100-320gb", "a100-sxm4-40gb", "8", "199,000", "6,500",
                                "2026-11-22"]  # a launch list price: no estimate mark
    assert out.rstrip().endswith("3 servers; every row has a source and a retrieval date "
                                 "(--json shows them).")
    code, out, _ = _run(capsys, "servers", "--json")
    items = json.loads(out)["items"]
    assert [(i["name"], i["estimate"], i["price_usd"]) for i in items] == [
        ("dgx-h100", True, 270000), ("dgx-h200", True, 320000),
        ("dgx-a100-320gb", False, 199000)]
    assert all(i["source"] and i["retrieved"] == "2026-11-22" for i in items)
    assert _run(capsys, "servers", "-q")[1] == "dgx-h100\ndgx-h200\ndgx-a100-320gb\n"


def test_catalog_regions_lists_the_electricity_prices(capsys):
    code, out, _ = _run(capsys, "regions")
    assert code == 0
    assert ["texas", "tx", "0.0660", "2023", "2026-11-22"] in [l.split() for l in
                                                                out.splitlines()]
    assert "10 regions; every row has a source" in out
    items = json.loads(_run(capsys, "regions", "--json")[1])["items"]
    assert items[0]["name"] == "us-industrial-average" and items[0]["usd_per_kwh"] == 0.0806
    assert all(i["source"] and i["estimate"] is False for i in items)


@pytest.mark.parametrize("kind, hint", [
    ("gpu", "invalid choice: 'gpu'; did you mean 'gpus'? (choose from gpus, models,"),
    ("server", "invalid choice: 'server'; did you mean 'servers'?"),
    ("xyz", "invalid choice: 'xyz' (choose from gpus,"),
])
def test_a_listing_typo_gets_a_close_match(capsys, kind, hint):
    code, _, err = _run(capsys, kind)
    assert code == 2 and f"error: argument kind: {hint}" in err and err.count("\n") == 1


def test_gpu_flops_columns_say_dense(capsys):
    header = _run(capsys, "gpus")[1].splitlines()[0]
    assert "16-bit dense TFLOP/s" in header and "fp8 dense TFLOP/s" in header
