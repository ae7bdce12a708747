"""Whole instances: a job pays for every GPU of the instances it rents, and the offer
billed is the one whose whole instances cost it least."""

from __future__ import annotations

import datetime as dt

import pytest

from infraplan.economics.instances import Footprint, rent, training_footprint
from infraplan.economics.offers import Offer, offers_for
from infraplan.serving.deployment import Deployment
from infraplan.serving.scenario import ServeScenario
from infraplan.training.plan_train import plan_training
from infraplan.workloads import TrainScenario


@pytest.mark.parametrize("footprint, instance_gpus, billed", [
    (Footprint(2, 2, 3), 8, 8),  # three TP=2 replicas share one 8-GPU instance
    (Footprint(2, 2, 4), 8, 8),
    (Footprint(2, 2, 5), 8, 16),
    (Footprint(3, 3, 3), 8, 16),  # two TP=3 replicas to an instance, two GPUs idle
    (Footprint(2, 2, 3), 2, 6),
    (Footprint(8, 16, 2), 8, 32),  # a replica over two nodes takes two instances
    (training_footprint(12, 8), 8, 16),  # 12 GPUs: two 8-GPU nodes
    (training_footprint(4, 8), 8, 8),  # 4 GPUs: half an 8-GPU node
    (training_footprint(64, 8), 8, 64),
])
def test_billed_gpus_are_whole_instances(footprint, instance_gpus, billed):
    assert footprint.billed_gpus(instance_gpus) == billed


def _offer(count: int, usd_per_gpu_hour: float, sizes: tuple[int, ...] = ()) -> Offer:
    return Offer(provider="example", instance_type=f"{count}x{sizes}", accelerator="h100",
                 count=count, sizes=sizes, on_demand_usd_per_hour=count * usd_per_gpu_hour,
                 observed="2026-11", estimate=True, source="a test", retrieved=dt.date.today())


def test_the_offer_billed_is_the_cheapest_in_whole_instances():
    """Three TP=2 replicas: 8-GPU instances at $2.95 bill 8 GPUs ($23.60/h), 2-GPU ones at
    $3.50 bill 6 ($21.00/h); a fourth replica fills the 8-GPU instance ($23.60 < $28.00)."""
    table = [_offer(1, 2.50), _offer(8, 2.95), _offer(2, 3.50)]
    three = rent("h100", "on_demand", Footprint(2, 2, 3), offers=table)
    assert (three.offer.count, three.billed_gpus) == (2, 6)
    assert three.usd_per_gpu_hour * 6 == pytest.approx(21.00)
    four = rent("h100", "on_demand", Footprint(2, 2, 4), offers=table)
    assert (four.offer.count, four.billed_gpus) == (8, 8)
    assert four.usd_per_gpu_hour * 8 == pytest.approx(23.60)
    one_gpu = rent("h100", "on_demand", Footprint(1, 1, 3), offers=table)
    assert (one_gpu.offer.count, one_gpu.usd_per_gpu_hour) == (1, 2.50)
    # nothing holds a TP=16 group in one instance: the cheapest GPU-hour, billed per GPU
    wide = rent("h100", "on_demand", Footprint(16, 16, 1), offers=table)
    assert (wide.offer.count, wide.billed_gpus, wide.fits) == (1, 16, False)
    assert (three.instance_gpus, four.instance_gpus, one_gpu.instance_gpus) == (2, 8, 1)


def test_an_offer_sold_per_gpu_in_several_sizes_rents_the_size_that_bills_least():
    """A per-GPU offer in pods of 1, 2, 4 or 8 GPUs was a 1-GPU instance: a TP=2 replica
    could not use it and paid for a whole 8-GPU node ($23.60/h) instead of 2 x $3.99."""
    pods = _offer(1, 3.99, (1, 2, 4, 8))
    table = [_offer(8, 2.95), pods]
    one = rent("h100", "on_demand", Footprint(2, 2, 1), offers=table)
    assert (one.offer, one.instance_gpus, one.billed_gpus) == (pods, 2, 2)
    assert one.usd_per_gpu_hour * 2 == pytest.approx(7.98)
    assert one.basis().endswith("example 1x(1, 2, 4, 8) (2026-11, an estimate) in 2-GPU "
                                "instances")
    # three TP=2 replicas: 2-GPU pods bill 6 GPUs ($23.94/h), the node 8 ($23.60/h)
    three = rent("h100", "on_demand", Footprint(2, 2, 3), offers=table)
    assert (three.offer.count, three.instance_gpus, three.billed_gpus) == (8, 8, 8)
    # TP=3 replicas fit 4-GPU pods, one GPU idle in each: billed 4 per replica
    odd = rent("h100", "on_demand", Footprint(3, 3, 1), offers=[pods])
    assert (odd.instance_gpus, odd.billed_gpus, odd.fits) == (4, 4, True)
    assert "whole 4-GPU instances billed, 4 GPUs at $3.99/GPU-h for the 3 used" in odd.basis()
    # 12 training GPUs on 8-GPU nodes rent 8-GPU pods: 16 billed
    wide = rent("h100", "on_demand", training_footprint(12, 8), offers=[pods])
    assert (wide.instance_gpus, wide.billed_gpus) == (8, 16)
    # nothing holds 16 in one instance: the cheapest GPU-hour, billed per GPU, not fitting
    huge = rent("h100", "on_demand", Footprint(16, 16, 1), offers=[pods])
    assert (huge.billed_gpus, huge.fits) == (16, False)


def _chat() -> ServeScenario:
    return ServeScenario.model_validate({
        "model": "llama-3.1-8b", "traffic": {
            "arrival": {"kind": "poisson", "rate_per_s": 1}, "num_requests": 10,
            "input": {"kind": "fixed", "value": 10}, "output": {"kind": "fixed", "value": 10}}})


def test_a_serving_deployment_pays_for_the_whole_instance_its_replicas_fill():
    """One TP=2 H200 replica was billed 2 GPUs at an 8-GPU instance's rate; renting that
    instance costs 8 of them (the shipped H200 offers come as 1-GPU or 8-GPU instances)."""
    scenario = _chat()
    assert not any(2 in o.instance_sizes for o in offers_for("h200"))
    node = min(o.usd_per_gpu_hour() for o in offers_for("h200") if o.largest >= 8)
    for replicas, billed in ((1, 8), (3, 8), (4, 8), (5, 16)):
        dep = Deployment(model="llama-3.1-8b", gpu="h200", tp=2, replicas=replicas)
        compute = scenario.monthly_economics(dep)["cost"]["items"][0]
        assert compute["usd"] == pytest.approx(billed * node * 730.56)
        assert scenario.deployment_price(dep) * dep.num_gpus == pytest.approx(billed * node)
        assert (f"{billed} GPUs at ${node:.2f}/GPU-h for the {2 * replicas} used"
                in compute["formula"]) == (billed > 2 * replicas)


def test_a_replica_rents_a_pod_of_its_own_size_where_one_is_sold():
    """RunPod rents H100 pods of 1, 2, 4 or 8 GPUs at one per-GPU rate; stored as 1-GPU
    instances, a TP=2 replica could not use them and paid for an 8-GPU node ($23.60/h)."""
    scenario = _chat()
    pods = next(o for o in offers_for("h100") if o.provider == "runpod" and 2 in o.sizes)
    node = min(o.usd_per_gpu_hour() * 8 for o in offers_for("h100") if o.largest >= 8)
    assert 2 * pods.usd_per_gpu_hour() < node  # so the pod is the cheaper rental
    dep = Deployment(model="llama-3.1-8b", gpu="h100", tp=2, replicas=1)
    assert scenario.deployment_price(dep) * 2 == pytest.approx(2 * pods.usd_per_gpu_hour())
    compute = scenario.monthly_economics(dep)["cost"]["items"][0]
    assert (f"runpod {pods.instance_type} ({pods.observed}"
            + (", an estimate" if pods.estimate else "") + ") in 2-GPU instances"
            in compute["formula"])


def test_a_training_job_smaller_than_a_node_pays_for_the_node():
    """4 H200s priced at an 8-GPU instance's rate were billed for 4 GPUs (no shipped H200
    offer has a 4-GPU instance)."""
    scenario = TrainScenario.model_validate({
        "model": "llama-3.1-8b", "top": 1,
        "training": {"tokens": 1e9, "global_batch": 64, "seq_len": 2048},
        "hardware": {"gpus": ["h200"], "counts": [4]}})
    assert not any(4 in o.instance_sizes for o in offers_for("h200"))
    node = min(o.usd_per_gpu_hour() for o in offers_for("h200") if o.largest >= 8)
    best = plan_training(scenario).best[0]
    assert best.economics["usd_per_gpu_hour"] == pytest.approx(2 * node)
    compute = best.economics["cost"]["items"][0]
    assert "8 GPUs at $" in compute["formula"] and "for the 4 used" in compute["formula"]
