"""The `infraplan` command: parse, call the library, print. Bad input: one line, exit 2."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from collections.abc import Sequence

from infraplan.cli_serve import run_plan_serve, run_simulate_serve, seed_override
from infraplan.cli_tco import add_tco
from infraplan.cli_validate import run_validate_serving, run_validate_training
from infraplan.errors import EXIT_BAD_INPUT, InputError, close_matches
from infraplan.report.output import add_output_flags, emit, progress
from infraplan.spec_checks import MAX_WHOLE_NUMBER, shown_value


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # the deepest command parsed names its own help (subcommands share this class)
        self.set_defaults(command_prog=self.prog)

    def error(self, message: str):  # one line, no usage dump, exit 2
        self.exit(EXIT_BAD_INPUT, f"error: {message} (see '{self.prog} --help')\n")

    def parse_args(self, args=None, namespace=None):
        """argparse's, but a word left over is refused by the command it follows
        ('infraplan model --help', not 'infraplan --help')."""
        parsed, extra = self.parse_known_args(args, namespace)
        if extra:
            prog = getattr(parsed, "command_prog", self.prog)
            self.exit(EXIT_BAD_INPUT, f"error: unrecognized arguments: {' '.join(extra)} "
                                      f"(see '{prog} --help')\n")
        return parsed


def _whole_number(low: int, high: int | None = None):
    """An argparse type: a whole number >= low and <= high if given (argparse prefixes the
    flag to the error). Flags that fill a spec field leave the upper bound to the spec."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:  # past 4,300 digits too
            raise argparse.ArgumentTypeError(
                f"expected a whole number, got {shown_value(text)}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be >= {low}, got {shown_value(value)}")
        if high is not None and value > high:
            raise argparse.ArgumentTypeError(f"must be at most {high:,}, got {shown_value(value)}")
        return value
    return parse


_positive_int = _whole_number(1)
# the spec's ceiling, checked here so the error names --seed, not the field it overrides
_seed = _whole_number(0, MAX_WHOLE_NUMBER)


def _number(low: float, *, above: bool, high: float | None = None):
    """An argparse type: a finite number > low (above) or >= low, and <= high if given;
    the error names the flag (argparse prefixes it), not the library's parameter."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        bound = f"> {low:g}" if above else f">= {low:g}"
        if high is not None:
            bound += f" and <= {high:g}"
        if not (math.isfinite(value) and (value > low if above else value >= low)
                and (high is None or value <= high)):
            raise argparse.ArgumentTypeError(f"must be a finite number {bound}, got {text}")
        return value
    return parse


def _choice(choices: list[str]):
    """An argparse type: one of `choices`, else argparse's 'invalid choice' with the close
    matches ('gpu' -> did you mean 'gpus'?)."""
    def parse(text: str) -> str:
        if text in choices:
            return text
        close = close_matches(text, choices)
        hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
        raise argparse.ArgumentTypeError(f"invalid choice: {text!r}{hint} (choose from "
                                         f"{', '.join(choices)})")
    return parse


def _add_memory(sub) -> None:
    p = sub.add_parser("memory", help="will a training / fine-tuning job fit? memory per GPU",
                       description="Memory per accelerator of one training or fine-tuning "
                                   "plan, and whether it fits. Flags override the scenario.",
                       epilog="exit status: 0 when the plan fits, 1 when it does not (the "
                              "report says what would make it fit), 2 on bad input")
    p.add_argument("scenario", nargs="?", help="scenario YAML (see examples/)")
    p.add_argument("--model", help="catalog model ('llama-3.1-70b') or config.json path")
    p.add_argument("--gpu", help="accelerator name or alias ('h100', 'a100-sxm4-80gb')")
    p.add_argument("--num-gpus", type=_positive_int, help="accelerators in the job (1)")
    for name, text in [("tp", "tensor parallel"), ("pp", "pipeline stages"),
                       ("dp", "data parallel (default: num-gpus / (tp*pp*cp))"),
                       ("cp", "context parallel"), ("ep", "expert parallel"),
                       ("etp", "the routed experts' tensor parallel (default: tp; 1 folds "
                               "whole experts over the TP ranks)"),
                       ("vp", "virtual pipeline stages per rank (interleaved 1F1B)")]:
        p.add_argument(f"--{name}", type=_positive_int, help=text)
    p.add_argument("--zero", type=int, choices=[0, 1, 2, 3], help="ZeRO stage (3 = FSDP)")
    p.add_argument("--recompute", choices=["none", "selective", "full"])
    p.add_argument("--recompute-fraction", type=_number(0, above=True, high=1),
                   help="with --recompute full: share of each stage's layers recomputed "
                        "(the rest selective), e.g. 0.25")
    p.add_argument("--sequence-parallel", action=argparse.BooleanOptionalAction,
                   help="split activations over the TP ranks (needs tp > 1)")
    p.add_argument("--micro-batch", type=_positive_int, help="sequences per micro-batch")
    p.add_argument("--global-batch", type=_positive_int, help="sequences per optimizer step")
    p.add_argument("--seq-len", type=_positive_int, help="tokens per sequence (4096)")
    p.add_argument("--precision", choices=["bf16", "fp16", "fp8", "fp32"],
                   help="default: 16-bit, bf16 or fp16 on chips without bf16 (V100, T4)")
    p.add_argument("--grad-dtype", choices=["fp32", "bf16", "fp16"],
                   help="fp32 = Megatron-LM main grads (default: the training dtype)")
    p.add_argument("--optimizer", choices=["adamw", "adamw-bf16", "adamw-8bit",
                                           "sgd-momentum"])
    p.add_argument("--kernels", choices=["fused", "eager"],
                   help="fused: flash attention and fused norms (default); eager: plain "
                        "PyTorch ops with the s x s attention scores kept in 16 bits, as in "
                        "Korthikanti et al. 2022 (Hugging Face's eager attention also keeps "
                        "an fp32 softmax: 6 bytes a score, 3 x this estimate's 2)")
    p.add_argument("--finetune", choices=["full", "lora", "qlora"])
    p.add_argument("--lora-rank", type=_positive_int)
    p.add_argument("--lora-targets", help="comma list: all-linear, attention, mlp, q_proj,...")
    add_output_flags(p)
    p.set_defaults(run=_run_memory)


def _memory_flags(args) -> dict:
    from infraplan.physics.memory.states import valid_lora_targets
    from infraplan.training.fit_check import FLAG_PATHS

    values = {name: getattr(args, name) for name in FLAG_PATHS}
    if args.lora_targets is not None:
        values["lora_targets"] = [t.strip() for t in args.lora_targets.split(",")]
        if not all(values["lora_targets"]):
            raise InputError(f"--lora-targets {args.lora_targets!r} has an empty target; valid "
                             f"targets: {valid_lora_targets()}",
                             fix="pass --lora-targets all-linear, or a comma list such as "
                                 "q_proj,v_proj")
    return values


def _run_memory(args) -> int:
    from infraplan.report.terminal import memory_report
    from infraplan.training.fit_check import (CONTEXT_FLAGS, fit_check, in_flag_terms,
                                              in_flags_alone_terms, memory_overrides,
                                              refuse_ignored_flags, scenario_from_flags,
                                              with_examples)
    from infraplan.scenario_files import load_scenario
    from infraplan.workloads import MemoryScenario

    flags = _memory_flags(args)
    if not args.scenario:
        for flag in ("model", "gpu"):
            if getattr(args, flag) is None:
                raise InputError(f"--{flag} is required without a scenario file",
                                 fix=f"pass --{flag} or a scenario YAML")

    def scenario_of(values):
        if not args.scenario:
            return scenario_from_flags(values)
        try:
            return load_scenario(args.scenario, MemoryScenario, memory_overrides(values))
        except InputError as exc:  # a flag's bad value: name the flag, not the file's key
            raise with_examples(in_flag_terms(exc, values, Path(args.scenario).name)
                                 ) from None

    # a flag that needs another (--lora-rank needs --finetune lora) is refused in flag terms
    # before the scenario's own check refuses it in field terms; the flags it needs are
    # not among those it sets, so the scenario without it decides
    needing = {name: None for name in CONTEXT_FLAGS if flags.get(name) is not None}
    try:
        scenario = scenario_of({**flags, **needing})
        refuse_ignored_flags(flags, scenario)
        if needing:
            scenario = scenario_of(flags)
        check = fit_check(scenario)
    except InputError as exc:
        if args.scenario:
            raise
        raise in_flags_alone_terms(exc) from None
    report = check.report
    emit(args, "memory", check.to_json(), lambda: memory_report(check),
         lambda: ("fits" if report.fits else "DOES NOT FIT") +
         f": {report.total_bytes / 2**30:,.2f} GiB of "
         f"{report.capacity_bytes / 2**30:,.2f} GiB per accelerator")
    return 0 if report.fits else 1  # a check a script can test: `infraplan memory job.yaml &&`


def _add_catalog(sub) -> None:
    p = sub.add_parser("catalog", help="list what the shipped catalog holds")
    kinds = ["gpus", "models", "systems", "networks", "storage", "engines", "offers",
             "prices", "servers", "regions"]
    p.add_argument("kind", choices=kinds, type=_choice(kinds),
                   help="what to list: accelerators, model architectures, systems (nodes), "
                        "networks, storage tiers, serving engines, cloud offers ('prices' "
                        "is another name for offers), and the servers and regions that "
                        "'infraplan tco' prices")
    p.add_argument("--gpu", help="offers and prices: one accelerator's (name or alias), "
                                 "cheapest first")
    add_output_flags(p, quiet_what="one row a line, its name (an offer: provider, instance "
                                   "type and region), for scripts")
    p.set_defaults(run=_run_catalog)


def _run_catalog(args) -> int:
    from infraplan.report import catalog

    priced = args.kind in ("offers", "prices")
    if args.gpu is not None and not priced:
        raise InputError(f"--gpu picks one accelerator's offers; catalog {args.kind} lists "
                         "every row", fix=f"drop --gpu, or run: infraplan catalog offers "
                                          f"--gpu {args.gpu}")
    listing = catalog.offers(args.gpu) if priced else catalog.LISTINGS[args.kind]()
    _, rows, records = listing
    # --quiet: one row a line, its name alone (an offer: provider, instance type, region),
    # for scripts such as: for gpu in $(infraplan catalog gpus -q); do ...
    key = (0, 1, 4) if priced else (0,)
    what = f"{args.kind} of {rows[0][2]}" if args.gpu is not None else None
    return emit(args, "catalog", records, lambda: "\n".join(filter(None, (
        catalog.render(args.kind, listing, what),
        args.gpu and catalog.sibling_offers(rows[0][2])))),
                lambda: "\n".join(" ".join(str(row[i]) for i in key) for row in rows))


def _add_model(sub) -> None:
    p = sub.add_parser(
        "model", help="architecture math of one model: params, FLOPs, KV",
        description="Parameters, FLOPs per token and KV-cache bytes per token of a catalog "
                    "model or a Hugging Face config.json (a key the file leaves out takes "
                    "its family's transformers default). FLOPs: 2 per multiply-add, over "
                    "every weight matmul a token goes through (an MoE token through its "
                    "experts_per_token experts), the output layer included and the input "
                    "embedding (a lookup) excluded; attention adds 2 x heads x (key + value "
                    "width) per attended key, a causal query attending (s+1)/2 keys on "
                    "average at sequence length s (a sliding window caps them); norms, "
                    "activations, softmax and biases are not counted. Training = 3 x "
                    "forward (backward = 2 x forward; recomputation not included). "
                    "Non-embedding parameters leave out the token (and position) tables and "
                    "so a tied output layer; an untied one is counted.")
    p.add_argument("name", help="catalog model or config.json path")
    p.add_argument("--seq-len", type=_positive_int, default=None,
                   help="sequence length of the FLOPs per token (default: 4096, or the "
                        "model's context if shorter)")
    add_output_flags(p)
    p.set_defaults(run=_run_model)


def _run_model(args) -> int:
    from infraplan.report.model import model_summary
    from infraplan.workloads import MAX_SEQ_LEN

    # the same bound as a scenario's seq_len
    if args.seq_len is not None and args.seq_len > MAX_SEQ_LEN:
        raise InputError(f"--seq-len must be <= {MAX_SEQ_LEN:,} (got {args.seq_len:,})")
    summary = model_summary(args.name, args.seq_len)
    return emit(args, "model", summary, lambda: summary["text"],
                lambda: summary["text"].splitlines()[0])  # name, family, parameters


def add_seed_flag(parser, seed_field: str) -> None:
    """`--seed N`, in place of the scenario's `seed_field` (see seed_override)."""
    parser.add_argument("--seed", type=_seed, default=None,
                        help=f"random seed, in place of the scenario's {seed_field} (0 if it "
                             "sets none)")


def _kind_command(kinds, name: str, help_text: str, description: str, argument: str,
                  argument_help: str, run, seed_field: str | None = None) -> None:
    """`infraplan <verb> <kind> FILE [--json]`: plan train, validate training, ...;
    `seed_field` (a dotted scenario path) adds `--seed N`, which overrides it."""
    p = kinds.add_parser(name, help=help_text, description=description)
    p.add_argument(argument, help=argument_help)
    if seed_field:
        add_seed_flag(p, seed_field)
    add_output_flags(p)
    p.set_defaults(run=run, seed_field=seed_field)


def _add_plan(sub) -> None:
    p = sub.add_parser("plan", help="search the best plans for a workload")
    kinds = p.add_subparsers(dest="kind", required=True, parser_class=_Parser)
    _kind_command(kinds, "train", "training: parallelism, GPUs, time, GPU-hours",
                  "Search every parallel plan of a training scenario and rank the ones that "
                  "fit.", "scenario", "training scenario YAML (see examples/)", _run_plan_train)
    _kind_command(kinds, "serve", "serving: the cheapest deployment that meets the SLOs",
                  "Compare accelerators, TP, precision and batch limits for a serving "
                  "scenario; simulate each and find the fewest replicas that meet its SLOs.",
                  "scenario", "serving scenario YAML (see examples/)", run_plan_serve,
                  seed_field="seed")


def _add_simulate(sub) -> None:
    p = sub.add_parser("simulate", help="simulate one configuration: a training run's "
                                        "failures and costs, or serving under traffic")
    kinds = p.add_subparsers(dest="kind", required=True, parser_class=_Parser)
    _kind_command(kinds, "serve", "serving: latency, throughput, KV use, cost",
                  "Simulate the scenario's deployment under its traffic.", "scenario",
                  "serving scenario YAML (see examples/)", run_simulate_serve,
                  seed_field="seed")
    _kind_command(kinds, "train", "training run: failures, spot, checkpoints (Monte-Carlo)",
                  "Plan the scenario, then draw its best plan's run many times per pricing "
                  "strategy: wall time, goodput and cost as distributions.", "scenario",
                  "training scenario YAML with an optional run: section", _run_simulate_train,
                  seed_field="run.seed")


def _run_simulate_train(args) -> int:
    from infraplan.report.document import usd
    from infraplan.report.run import LABELS, run_report
    from infraplan.units import run_length
    from infraplan.training.plan_train import plan_training
    from infraplan.training.simulate_run import simulate_training_run
    from infraplan.scenario_files import load_scenario
    from infraplan.workloads import TrainScenario

    scenario = load_scenario(args.scenario, TrainScenario, seed_override(args))
    name = Path(args.scenario).name
    try:  # the run: block's checks against the plan: named in the file, as the load's are
        with progress(args, "drawing runs") as tick:
            sim = simulate_training_run(scenario, plan_training(scenario).best[0],
                                        progress=tick)
    except InputError as exc:
        if exc.message.startswith(f"{name}:"):
            raise
        raise InputError(f"{name}: {exc.message}", fix=exc.fix) from None
    return emit(args, "simulate_train", dict(model=scenario.model, **sim.to_json()),
                lambda: run_report(scenario.name or scenario.model, sim),
                lambda: "; ".join(f"{LABELS[k]}: {run_length(d.wall_s.p50)}, "
                                  f"{usd(d.cost_usd.p50)}"
                                  for k, d in sim.strategies.items()) + " (p50)")


def _run_plan_train(args) -> int:
    from infraplan.report.training import search_report
    from infraplan.training.plan_train import plan_training
    from infraplan.scenario_files import load_scenario
    from infraplan.workloads import TrainScenario

    scenario = load_scenario(args.scenario, TrainScenario)
    with progress(args, "searching plans") as tick:
        result = plan_training(scenario, progress=tick)
    b = result.best[0]
    return emit(args, "plan_train", dict(model=scenario.model, **result.to_json()),
                lambda: search_report(scenario.model, result),
                lambda: f"best: {b.plan.num_gpus} x {b.accelerator}, {b.plan.describe()}, "
                f"step {b.step_s:,.3f} s, MFU {b.mfu:.1%}")


def _add_validate(sub) -> None:
    from infraplan.report.validation import EXIT_HELP

    p = sub.add_parser("validate", help="predict published measurements, report the error",
                       description="Predict each row of a CSV of published training or "
                                   "serving measurements and print its signed error, then "
                                   "the median and max |error|. Exit status 2 when a row has "
                                   "bad input or the file cannot be read, else 0; "
                                   "'infraplan validate training --help' (or serving) says "
                                   "more.")
    kinds = p.add_subparsers(dest="kind", required=True, parser_class=_Parser)
    _kind_command(kinds, "training", "training step times / GPU-hours CSV",
                  "Predict each row of a training validation CSV (schema: "
                  f"validation/README.md). {EXIT_HELP['training']}", "file",
                  "CSV of published training measurements", run_validate_training)
    _kind_command(kinds, "serving", "serving throughputs / latencies CSV",
                  "Simulate each row of a serving validation CSV (schema: "
                  f"validation/README.md). {EXIT_HELP['serving']}", "file",
                  "CSV of published serving measurements", run_validate_serving)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="infraplan", description="Plan, simulate and check AI "
                     "infrastructure: will it fit, how long, how much.")
    from infraplan import __version__

    parser.add_argument("--version", action="version", version=f"infraplan {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    _add_memory(sub)
    _add_catalog(sub)
    _add_model(sub)
    _add_plan(sub)
    _add_simulate(sub)
    _add_validate(sub)
    add_tco(sub, _number)
    from infraplan.web.cli import add_report, add_ui  # neither imports the web stack yet

    add_report(sub)
    add_ui(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:  # `infraplan catalog gpus | head`
        return 0
    except KeyboardInterrupt:  # Ctrl-C: nothing half-written (outputs are atomic)
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
