"""infraplan: plan, simulate and check AI infrastructure for training and serving models.

The library is the product; the CLI and the web page are views of these calls:

    import infraplan as ip

    ip.param_counts(ip.load_model("llama-3.1-70b")).total
    scenario = ip.load_scenario("examples/train-llama-3.1-70b.yaml", ip.TrainScenario)
    best = ip.plan_training(scenario).best[0]        # time to train, GPU-hours, MFU, memory
    ip.simulate_training_run(scenario, best)          # failures, checkpoints, spot
    serve = ip.load_scenario("examples/serve-llama8b-chat.yaml", ip.ServeScenario)
    ip.simulate_scenario(serve)["summary"]           # its deployment: latency, cost
    ip.plan_serving(serve).best                      # fewest replicas that meet the SLOs
    ip.validate_training("validation/training_dev.csv").median_abs_error_pct

Names load on first use, so `import infraplan` stays instant (the CLI starts from it).
"""

from importlib import import_module

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS = {
    # catalog and model architectures
    "load_catalog": "infraplan.catalog", "load_model": "infraplan.models",
    "param_counts": "infraplan.models", "kv_cache_bytes": "infraplan.models",
    "training_flops_per_sequence": "infraplan.models",
    # scenarios (YAML files or dicts through `parse_spec`)
    "load_scenario": "infraplan.scenario_files", "parse_spec": "infraplan.scenario_files",
    "MemoryScenario": "infraplan.workloads", "TrainScenario": "infraplan.workloads",
    "ServeScenario": "infraplan.serving.scenario",
    # training: memory, plan search, the run under failures
    "training_memory": "infraplan.training.memory",
    "memory_for_scenario": "infraplan.training.memory",
    "MemoryOptions": "infraplan.physics.memory.training",
    "ParallelPlan": "infraplan.training.plan", "plan_training": "infraplan.training.plan_train",
    "simulate_training_run": "infraplan.training.simulate_run",
    # serving: one deployment under traffic, the cheapest deployment meeting SLOs
    "Deployment": "infraplan.serving", "TrafficSpec": "infraplan.serving",
    "Slo": "infraplan.serving", "generate": "infraplan.serving",
    "simulate": "infraplan.serving", "summarize": "infraplan.serving",
    "simulate_scenario": "infraplan.serving.run", "plan_serving": "infraplan.serving.planner",
    # checking predictions against published runs
    "validate_training": "infraplan.training.validate",
    "validate_serving": "infraplan.serving.validate",
    # errors every call may raise on bad input
    "InputError": "infraplan.errors",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'infraplan' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
