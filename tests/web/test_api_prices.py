"""The forms' price inputs: `pricing` (on demand, spot, reserved) and `prices` (one USD per
GPU-hour for every accelerator, or name=price pairs) reach the scenario, so the plans' costs
are GPU-hours x the user's price and say it is the user's. Before, the API refused both
fields (train) or spot only (serve), and the web priced every accelerator at the cheapest
catalog offer."""

from __future__ import annotations

import pytest

from tests.web.test_api import PLAN_SERVE_BODY, SIM_BODY, TRAIN_BODY

HOURS_PER_MONTH = 30.44 * 24  # serving's month (SECONDS_PER_MONTH / 3600)
FORMS = ("give USD per GPU-hour, one number for every accelerator (2.50) or name=price pairs "
         "(h100=2.50, a100=1.60)")
OUT_OF_RANGE = ("a price is above $0 and at most $1,000 per GPU-hour. To fix: give the USD "
                "you pay per GPU-hour, e.g. 2.50")
SMALL_TRAIN = dict(TRAIN_BODY, tokens=1e10, max_count=16)


def _plans(result: dict) -> list[dict]:
    plans = result["best"] + result["frontier"] + result["by_accelerator"]
    assert plans
    return plans


def test_a_training_plans_cost_is_its_gpu_hours_times_the_given_price(client):
    r = client.post("/api/plan/train", json=dict(SMALL_TRAIN, prices="h100=2.50, a100=1.60"))
    assert r.status_code == 200, r.text
    want = {"h100-sxm5-80gb": 2.50, "a100-sxm4-80gb": 1.60}
    seen = set()
    for plan in _plans(r.json()["result"]):
        price = want[plan["accelerator"]]
        seen.add(plan["accelerator"])
        economics = plan["economics"]
        assert economics["usd_per_gpu_hour"] == price
        assert round(economics["cost"]["total_usd"], 2) == round(plan["gpu_hours"] * price, 2)
        assert "the scenario's price" in economics["cost"]["items"][0]["formula"]
    assert seen == set(want)
    html = r.json()["html"]
    assert "x $2.50/GPU-h (your price (prices), per GPU used" in html
    assert "offer" not in html.split("x $2.50/GPU-h", 1)[1].split(")", 1)[0]


def test_one_number_prices_every_accelerator_chosen(client):
    r = client.post("/api/plan/train", json=dict(SMALL_TRAIN, prices="3"))
    assert r.status_code == 200, r.text
    for plan in _plans(r.json()["result"]):
        assert round(plan["economics"]["cost"]["total_usd"], 2) == \
            round(plan["gpu_hours"] * 3.0, 2)
    r = client.post("/api/plan/train", json=dict(SMALL_TRAIN, prices=3))  # a JSON number
    assert r.status_code == 200, r.text
    assert {p["economics"]["usd_per_gpu_hour"] for p in _plans(r.json()["result"])} == {3.0}


def test_spot_pricing_prices_plans_at_a_spot_offer(client):
    on_demand = client.post("/api/plan/train", json=dict(SMALL_TRAIN, gpus=["h100"]))
    spot = client.post("/api/plan/train", json=dict(SMALL_TRAIN, gpus=["h100"],
                                                    pricing="spot"))
    assert spot.status_code == 200, spot.text
    before = on_demand.json()["result"]["best"][0]["economics"]
    after = spot.json()["result"]["best"][0]["economics"]
    assert before["cost"]["items"][0]["name"] == "compute (on-demand)"
    assert after["cost"]["items"][0]["name"] == "compute (spot)" and after["pricing"] == "spot"
    assert "(cheapest on-demand offer" in before["cost"]["items"][0]["formula"]
    assert "(cheapest spot offer" in after["cost"]["items"][0]["formula"]
    assert after["usd_per_gpu_hour"] < before["usd_per_gpu_hour"]
    # the page tells how to give one's own price in the form's terms
    assert "set prices (h100-sxm5-80gb=...) for yours" in spot.json()["html"]


def test_a_serving_plans_monthly_cost_is_its_gpus_times_the_given_price(client):
    r = client.post("/api/plan/serve",
                    json=dict(PLAN_SERVE_BODY, prices="l40s=0.50, h100=2.50"))
    assert r.status_code == 200, r.text
    best = r.json()["result"]["best"]
    price = {"h100-sxm5-80gb": 2.50, "l40s": 0.50}[best["deployment"]["gpu"]]
    gpus = best["deployment"]["tp"] * best["deployment"]["replicas"]
    month = best["economics_per_month"]
    assert round(month["cost"]["total_usd"], 2) == round(gpus * HOURS_PER_MONTH * price, 2)
    assert best["usd_per_hour"] == pytest.approx(gpus * price)
    assert "the scenario's price" in month["cost"]["items"][0]["formula"]
    assert "your price (prices)" in r.json()["html"]


def test_a_simulated_deployment_is_priced_at_the_given_price(client):
    r = client.post("/api/simulate/serve", json=dict(SIM_BODY, prices="2.5", sweep=False,
                                                     pricing="spot"))
    assert r.status_code == 200, r.text
    cost = r.json()["result"]["cost"]
    assert cost["usd_per_gpu_hour"] == 2.5  # the user's price wins over the spot offer
    assert cost["price_basis"].startswith("the scenario's price")


def test_serving_takes_reserved_pricing_and_says_what_it_needs(client):
    """Serving refused reserved-1y ('Input should be 'on_demand' or 'spot'')."""
    r = client.post("/api/plan/serve", json=dict(PLAN_SERVE_BODY, pricing="reserved-1y"))
    assert r.status_code == 422
    detail = r.json()["detail"]
    assert detail.startswith("pricing 'reserved-1y' prices none of gpus: no reserved-1y "
                             "offer for h100-sxm5-80gb in the offers table")
    assert detail.endswith("To fix: set pricing to one the offers list for them, or give "
                           "prices (h100-sxm5-80gb=2.50) (USD per GPU-hour)")


@pytest.mark.parametrize("prices, detail", [
    ("abc", f"prices: 'abc' is not a price or a name=price pair. To fix: {FORMS}"),
    ("h100 2.5", f"prices: 'h100 2.5' is not a price or a name=price pair. To fix: {FORMS}"),
    ("h100=2.5, a100", f"prices: 'a100' is not a price or a name=price pair. To fix: {FORMS}"),
    ("h100=two", f"prices: 'h100=two' is not a price or a name=price pair. To fix: {FORMS}"),
    ("nan", f"prices: 'nan' is not a price or a name=price pair. To fix: {FORMS}"),
    ("0", f"prices: '0': {OUT_OF_RANGE}"),
    ("h100=-2", f"prices: 'h100=-2': {OUT_OF_RANGE}"),
    ("a100=1e9", f"prices: 'a100=1e9': {OUT_OF_RANGE}"),
    ("h100=1e400", f"prices: 'h100=1e400': {OUT_OF_RANGE}"),  # inf: the page says the same
    ("h10O=2.5", "prices: 'h10O=2.5': unknown accelerator 'h10O'; did you mean "
                 "'h100-sxm5-80gb'? To fix: name an accelerator of the list (or its alias)"),
    ("l40s=0.8", "prices: 'l40s=0.8': l40s is not among the accelerators chosen "
                 "(h100-sxm5-80gb, a100-sxm4-80gb). To fix: pick l40s in the accelerators "
                 "too, or drop its price"),
    ("h100=2, h100-sxm5-80gb=3", "prices: 'h100=2' and 'h100-sxm5-80gb=3' price the same "
                                 "accelerator (h100-sxm5-80gb). To fix: keep one of them"),
    ({"h100": "2"}, "prices: 'h100=2' is not a price. To fix: " + FORMS),
    (True, "prices: must be one number for every accelerator (2.50) or name=price pairs "
           "(h100=2.50, a100=1.60), in USD per GPU-hour (got true)"),
    ("2," * 300, "prices: has 600 characters: at most 500 (a price per accelerator compared) "
                 '(got "2,2,2,2,2,2,2,2,2,2,2,2,2,2,2...)'),
], ids=["word", "no-equals", "bare-name", "word-price", "nan", "zero", "negative", "huge", "inf",
        "typo", "not-chosen", "alias-twice", "string-in-object", "bool", "too-long"])
def test_bad_prices_are_one_422_naming_the_field_and_the_fix(client, prices, detail):
    r = client.post("/api/plan/train", json=dict(TRAIN_BODY, prices=prices))
    assert r.status_code == 422, r.text
    assert r.json() == {"detail": detail}


def test_a_price_for_another_accelerator_than_the_one_simulated_is_refused(client):
    r = client.post("/api/simulate/serve", json=dict(SIM_BODY, prices="a100=1.6"))
    assert r.status_code == 422
    assert r.json() == {"detail": "prices: 'a100=1.6': a100-sxm4-80gb is not among the "
                                  "accelerators chosen (h100-sxm5-80gb). To fix: pick "
                                  "a100-sxm4-80gb in the accelerators too, or drop its price"}
