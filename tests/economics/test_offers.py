"""The offers table (catalog/data/offers.csv) and its queries."""

from __future__ import annotations

import datetime as dt

import pytest

from infraplan.catalog import load_catalog
from infraplan.economics.offers import (COLUMNS, PRICINGS, Offer, cheapest, load_offers,
                                        offers_for, price_per_gpu_hour)
from infraplan.errors import InputError, UnknownNameError

OFFERS = load_offers()
HEADER = ",".join(COLUMNS)
GOOD = "aws,p5.48xlarge,h100,8,,us-east-1,55.04,,,,2026-11-09,false,somewhere,2026-11-22,"


def write(tmp_path, *rows: str, header: str = HEADER):
    path = tmp_path / "offers.csv"
    path.write_text("\n".join([header, *rows]) + "\n")
    return path


def test_the_shipped_table_loads_with_provenance():
    assert 50 <= len(OFFERS) <= 80
    for o in OFFERS:
        assert len(o.source) > 10 and o.retrieved >= dt.date(2026, 11, 22), o
        assert o.observed <= o.retrieved.isoformat()  # a price is seen before it is read
        assert any(o.usd_per_hour(p) is not None for p in PRICINGS)


def test_every_accelerator_is_a_catalog_name():
    gpus = load_catalog().accelerators
    assert all(gpus.get(o.accelerator).name == o.accelerator for o in OFFERS)


def test_one_row_per_provider_instance_and_region():
    keys = [(o.provider, o.instance_type, o.region) for o in OFFERS]
    assert len(keys) == len(set(keys))


@pytest.mark.parametrize("provider", ["aws", "gcp", "azure", "coreweave", "lambda", "runpod",
                                      "crusoe", "nebius"])
def test_each_named_provider_has_offers(provider):
    assert any(o.provider == provider for o in OFFERS)


@pytest.mark.parametrize("family", ["h100", "h200", "a100", "l40s", "l4", "a10g", "mi300x",
                                    "tpu"])
def test_each_named_accelerator_family_is_sold(family):
    assert any(o.accelerator.split("-")[0] == family or o.accelerator.startswith(family + "-")
               for o in OFFERS)


def test_spot_is_below_on_demand_wherever_both_are_given():
    both = [o for o in OFFERS if o.spot_usd_per_hour is not None
            and o.on_demand_usd_per_hour is not None]
    assert len(both) >= 10
    assert all(o.spot_usd_per_hour < o.on_demand_usd_per_hour for o in both), \
        [o.instance_type for o in both if o.spot_usd_per_hour >= o.on_demand_usd_per_hour]


def test_reserved_is_below_on_demand_wherever_both_are_given():
    for o in OFFERS:
        for term in ("reserved-1y", "reserved-3y"):
            if o.usd_per_hour(term) is not None and o.on_demand_usd_per_hour is not None:
                assert o.usd_per_hour(term) < o.on_demand_usd_per_hour, o


def test_per_gpu_price_is_the_instance_price_over_its_count():
    (p5,) = offers_for("h100", provider="aws", region="us-east-1")
    assert (p5.instance_type, p5.count, p5.on_demand_usd_per_hour) == ("p5.48xlarge", 8, 55.04)
    assert p5.on_demand_usd_per_gpu_hour == pytest.approx(55.04 / 8)
    assert p5.spot_usd_per_gpu_hour is None


@pytest.mark.parametrize("accelerator", ["h100-sxm5-80gb", "h200-sxm-141gb", "a100-sxm4-80gb",
                                         "l40s", "l4", "mi300x", "tpu-v5e", "b200-sxm-180gb"])
@pytest.mark.parametrize("pricing", PRICINGS)
def test_cheapest_is_the_minimum_per_gpu_price(accelerator, pricing):
    prices = [o.usd_per_hour(pricing) / o.count for o in OFFERS
              if o.accelerator == accelerator and o.usd_per_hour(pricing) is not None]
    if not prices:
        with pytest.raises(InputError, match=f"no {pricing} offer for {accelerator}"):
            cheapest(accelerator, pricing)
        return
    best = cheapest(accelerator, pricing)
    assert best.usd_per_gpu_hour(pricing) == pytest.approx(min(prices))
    assert price_per_gpu_hour(accelerator, pricing) == pytest.approx(min(prices))


def test_cheapest_respects_provider_and_region_filters():
    aws = [o.usd_per_gpu_hour("on_demand") for o in OFFERS
           if o.provider == "aws" and o.accelerator == "h100-sxm5-80gb"]
    assert price_per_gpu_hour("h100", providers=["aws"]) == pytest.approx(min(aws))
    assert cheapest("h100", providers=["aws"], regions=["us-west-1"]).region == "us-west-1"


def test_offers_for_accepts_aliases_and_sorts_cheapest_first():
    offers = offers_for("H100", pricing="spot")
    assert offers and all(o.accelerator == "h100-sxm5-80gb" for o in offers)
    prices = [o.spot_usd_per_gpu_hour for o in offers]
    assert prices == sorted(prices)


def test_nothing_matching_names_what_exists_and_how_to_fix():
    with pytest.raises(InputError) as err:
        cheapest("l40s", "spot")
    assert "on_demand: " in err.value.message and "crusoe" in err.value.message
    assert err.value.fix == "give a price in the scenario: prices: {l40s: 2.50}"
    with pytest.raises(InputError, match="no offer sells it"):
        cheapest("rtx-4090")


def test_typos_get_did_you_mean():
    with pytest.raises(UnknownNameError, match="did you mean 'spot'"):
        cheapest("h100", "spto")
    with pytest.raises(UnknownNameError, match="did you mean 'lambda'"):
        cheapest("h100", providers=["lamda"])
    assert cheapest("h100", "on-demand") == cheapest("h100", "on_demand")


def test_the_catalog_price_delegates_to_the_offers_table():
    assert load_catalog().price_per_gpu_hour("h100") == price_per_gpu_hour("h100")
    with pytest.raises(InputError, match="prices: {rtx-4090: 2.50}"):
        load_catalog().price_per_gpu_hour("rtx-4090")


def test_a_good_file_loads(tmp_path):
    (offer,) = load_offers(write(tmp_path, GOOD))
    assert isinstance(offer, Offer) and offer.accelerator == "h100-sxm5-80gb"
    assert offer.on_demand_usd_per_gpu_hour == pytest.approx(6.88)


BAD_ROWS = [
    (GOOD.replace(",55.04,", ",-55.04,"), "on_demand_usd_per_hour: Input should be greater"),
    (GOOD.replace(",h100,", ",h10,"), "accelerator: unknown accelerator 'h10'; did you mean"),
    (GOOD.replace(",55.04,", ",,"), "no price: give at least one of on_demand_usd_per_hour"),
    (GOOD.replace(",8,", ",0,"), "count: Input should be greater than or equal to 1"),
    (GOOD.replace("aws,", "AWS Cloud,"), "provider: 'AWS Cloud' must be a lower-case slug"),
    (GOOD.replace(",2026-11-09,", ",Nov 2026,"), "observed: 'Nov 2026' must be YYYY-MM-DD"),
    (GOOD.replace(",2026-11-22,", ",,"), "retrieved: Input should be a valid date"),
    (GOOD.replace(",55.04,", ",cheap,"), "on_demand_usd_per_hour: Input should be a valid number"),
    (GOOD.replace(",8,,", ",8,1-8,"), "sizes: '1-8' must be GPU counts of 1 or "
                                      "more separated by '|', like 1|2|4|8"),
    (GOOD.replace(",8,,", ",8,1|2|4,"), "sizes 1|2|4 must rise, without repeats, and include "
                                        "count (8)"),
    (GOOD.replace(",8,,", ",8,8|4,"), "sizes 8|4 must rise"),
]


@pytest.mark.parametrize("row, message", BAD_ROWS, ids=[m.split(":")[0] for _, m in BAD_ROWS])
def test_a_bad_row_names_the_line_and_the_column(tmp_path, row, message):
    with pytest.raises(InputError) as err:
        load_offers(write(tmp_path, GOOD.replace("us-east-1", "us-east-2"), row))
    assert "offers.csv, line 3: " in str(err.value) and message in str(err.value)


def test_sizes_read_from_their_cell_and_an_older_file_without_the_column_reads(tmp_path):
    (sized,) = load_offers(write(tmp_path, GOOD.replace(",8,,", ",1,1|2|4|8,").replace(
        ",55.04,", ",3.99,")))
    assert (sized.count, sized.instance_sizes, sized.largest) == (1, (1, 2, 4, 8), 8)
    assert sized.usd_per_gpu_hour() == pytest.approx(3.99)
    old_header = HEADER.replace("count,sizes,", "count,")
    (old,) = load_offers(write(tmp_path, GOOD.replace(",8,,", ",8,"), header=old_header))
    assert (old.sizes, old.instance_sizes, old.largest) == ((), (8,), 8)


def test_a_repeated_offer_and_a_bad_header_are_refused(tmp_path):
    with pytest.raises(InputError, match="line 3: .* repeats line 2"):
        load_offers(write(tmp_path, GOOD, GOOD))
    with pytest.raises(InputError, match="header missing notes; unknown note"):
        load_offers(write(tmp_path, GOOD, header=HEADER.replace("notes", "note")))


def test_a_plans_compute_line_names_the_offer_its_price_came_from():
    """plan train priced 1,024 A100s at a single-GPU community instance's rate and the bill
    never said so; the compute line now names the offer, or the scenario's price."""
    from infraplan.economics.cost import CostInputs
    from infraplan.economics.spec import EnergySpec, plan_economics

    def compute_basis(prices):
        econ = plan_economics("a100", 1024, 1000.0, 3600.0, prices=prices,
                              pricing="on_demand", costs=CostInputs(), energy=EnergySpec())
        return econ.cost.items[0].formula

    offer = cheapest("a100-sxm4-80gb", "on_demand")
    assert compute_basis({}) == (
        f"1,000 GPU-h x ${offer.usd_per_gpu_hour('on_demand'):.6g}/GPU-h (cheapest "
        f"on-demand offer: {offer.provider} {offer.instance_type}"
        + f" ({', '.join(filter(None, (offer.region, offer.observed)))}"
        + (", an estimate)" if offer.estimate else ")")
        + "; set prices: {a100-sxm4-80gb: ...} for yours)")
    assert compute_basis({"a100": 2.5}) == (
        "1,000 GPU-h x $2.50/GPU-h (the scenario's price, per GPU used: whole instances are "
        "billed only for catalog offers)")
