"""Catalog listings as rows (for tables) and as JSON-ready dicts."""

from __future__ import annotations

import textwrap

from infraplan.catalog import load_catalog
from infraplan.catalog.engines import Engine, ReleaseRange
from infraplan.economics.offers import PRICINGS, load_offers
from infraplan.errors import InputError
from infraplan.models import kv_cache_bytes_per_token, load_model, param_counts
from infraplan.report.terminal import table
from infraplan.units import GIGA, GiB, TERA, format_count


def gpus() -> tuple[list[str], list[list], list[dict]]:
    headers = ["name", "memory GiB", "HBM TB/s", "16-bit dense TFLOP/s",
               "fp8 dense TFLOP/s", "TDP W",
               "scale-up link", "GB/s/dir", "form"]
    rows, data = [], []
    for a in load_catalog().accelerators:
        bf16 = a.peak_flops.get("bf16") or a.peak_flops.get("fp16")
        fp8 = a.peak_flops.get("fp8")
        link = a.scale_up_link
        rows.append([a.name, f"{a.memory_bytes / GiB:.1f}",
                     f"{a.memory_bandwidth_bytes_per_s / TERA:.2f}",
                     f"{bf16 / TERA:,.0f}" if bf16 else "-",
                     f"{fp8 / TERA:,.0f}" if fp8 else "-", f"{a.tdp_watts:.0f}", link.kind,
                     f"{link.bandwidth_bytes_per_s_per_direction / GIGA:.0f}"
                     if link.bandwidth_bytes_per_s_per_direction else "-", a.form_factor])
        data.append(a.model_dump(mode="json"))
    return headers, rows, data


def models() -> tuple[list[str], list[list], list[dict]]:
    headers = ["name", "family", "params", "active", "layers", "hidden", "heads/kv",
               "attention", "context", "KV B/token bf16"]
    rows, data = [], []
    for entry in load_catalog().models:
        arch = load_model(entry.name)
        counts = param_counts(arch)
        at = arch.attention
        kv = kv_cache_bytes_per_token(arch, "bf16")
        rows.append([entry.name, arch.family, format_count(counts.total),
                     format_count(counts.active), arch.num_layers, arch.hidden_size,
                     f"{at.num_heads}/{at.num_kv_heads}", at.kind,
                     arch.max_position_embeddings, f"{kv:,.0f}"])
        data.append(dict(entry.model_dump(mode="json"), params_total=counts.total,
                         params_active=counts.active, kv_cache_bytes_per_token_bf16=kv))
    return headers, rows, data


def systems() -> tuple[list[str], list[list], list[dict]]:
    headers = ["name", "accelerators", "fabric", "GB/s/dir/GPU", "network", "NICs"]
    rows, data = [], []
    for s in load_catalog().systems:
        # a rack-scale NVLink domain spans nodes: say how many GPUs share the fabric
        domain = f" (NVLink domain {s.scale_up_domain_accelerators})" \
            if s.scale_up_domain_accelerators else ""
        rows.append([s.name, f"{s.accelerators_per_node} x {s.accelerator}{domain}",
                     s.intra_node_fabric,
                     f"{s.intra_node_bandwidth_bytes_per_s_per_direction / GIGA:.0f}",
                     s.network, s.nics_per_node])
        data.append(s.model_dump(mode="json"))
    return headers, rows, data


def networks() -> tuple[list[str], list[list], list[dict]]:
    headers = ["name", "kind", "Gb/s/dir per port", "latency us"]
    rows, data = [], []
    for n in load_catalog().networks:
        rows.append([n.name, n.kind, f"{n.bandwidth_bytes_per_s_per_direction * 8 / GIGA:.0f}",
                     f"{n.latency_s * 1e6:.1f}"])
        data.append(n.model_dump(mode="json"))
    return headers, rows, data


def _read_write(read, write, missing: str) -> str:
    """'21.5 / 1.07': a read and a write rate in GB/s, three significant figures."""
    if read is None and write is None:
        return missing
    return " / ".join("?" if x is None else f"{x / GIGA:.3g}" for x in (read, write))


def storage() -> tuple[list[str], list[list], list[dict]]:
    """Per-node and whole-tier rates, read and write side by side: a checkpoint's write
    time is bounded by the write total, often far below the read total (EFS: 21.5 / 1.07)."""
    headers = ["name", "kind", "read / write GB/s/node", "read / write GB/s total",
               "latency ms", "$/GB-month"]
    rows, data = [], []
    for s in load_catalog().storage:
        rows.append([s.name, s.kind,
                     _read_write(s.read_bytes_per_s_per_node, s.write_bytes_per_s_per_node,
                                 "-"),
                     _read_write(s.read_bytes_per_s_aggregate, s.write_bytes_per_s_aggregate,
                                 "scales with nodes") + (" *" if s.aggregate_basis else ""),
                     f"{s.latency_s * 1e3:g}",
                     "-" if s.price_usd_per_gb_month is None else s.price_usd_per_gb_month])
        data.append(s.model_dump(mode="json"))
    return headers, rows, data


def storage_footnotes(rows: list[list]) -> list[str]:
    """What each starred total of the tiers listed stands for, when it is not the whole
    tier's."""
    listed = {row[0] for row in rows}
    return [textwrap.fill(f"* {s.name} total: {s.aggregate_basis}", width=100,
                          subsequent_indent="  ")
            for s in load_catalog().storage if s.aggregate_basis and s.name in listed]


def offers_footnotes(rows: list[list]) -> list[str]:
    """The GPUs column's legend when a listed offer comes in several sizes."""
    sized = [row[3] for row in rows if isinstance(row[3], str)]
    if not sized:
        return []
    return textwrap.wrap(f"GPUs {sized[0]}: instances of any of these sizes, each at the "
                         "row's per-GPU price (a job rents the size that bills it least)",
                         width=100, subsequent_indent="  ")


def _releases(rule: ReleaseRange) -> str:
    if rule.since and rule.until:
        return f"{rule.since} to {rule.until}"
    return f"from {rule.since}" if rule.since else f"before {rule.until}"


def _step_overhead(engine: Engine) -> str:
    """'2', '2 (+0.09 a sequence, before 0.6)' where releases pay per running sequence, and
    '(at least 0.0294 a sequence on grace, from 1.0)' where a host loop floors the step."""
    text = f"{engine.step_overhead_s * 1e3:g}"
    for rule in engine.step_overhead_per_sequence:
        text += f" (+{rule.seconds * 1e3:g} a sequence, {_releases(rule)})"
    for rule in engine.host_time_per_sequence:
        text += (f" (at least {rule.seconds * 1e3:g} a sequence on {rule.host_cpu}, "
                 f"{_releases(rule)})")
    return text


def _kv_memory(engine: Engine) -> str:
    """'0.95 of free', and '(static batches 0.9 paged, from 0.10)' where releases run static
    batches through their in-flight batcher."""
    text = f"{engine.kv_memory_fraction:.2f} {engine.kv_memory_rule.replace('_', ' ')}"
    for rule in engine.executor_static_batches:
        if rule.kv_memory_fraction is not None:
            text += f" (static batches {rule.kv_memory_fraction:g} paged, {_releases(rule)})"
    return text


def engines() -> tuple[list[str], list[list], list[dict]]:
    headers = ["name", "max seqs", "max batched tokens", "block", "chunked prefill",
               "KV memory", "KV policy", "step overhead ms"]
    rows, data = [], []
    for e in load_catalog().engines:
        seqs, tokens = str(e.max_num_seqs), str(e.max_num_batched_tokens)
        if e.max_num_seqs_by_accelerator:
            seqs += " (" + ", ".join(f"{k} {v}" for k, v in
                                     e.max_num_seqs_by_accelerator.items()) + ")"
        if big := e.large_memory_defaults:
            on = f" on >= {big.min_memory_bytes / 2**30:g} GiB" + "".join(
                f", not {a}" for a in big.exclude_architectures)
            seqs += f" ({big.max_num_seqs}{on})"
            tokens += f" ({big.max_num_batched_tokens}{on})"
        block = str(e.block_size) + (f" ({e.block_sizes.choices})" if e.block_sizes else "")
        rows.append([e.name, seqs, tokens, block,
                     "yes" if e.chunked_prefill else "no",
                     _kv_memory(e), e.kv_policy.replace("_", " "), _step_overhead(e)])
        data.append(e.model_dump(mode="json"))
    return headers, rows, data


def offers(gpu: str | None = None) -> tuple[list[str], list[list], list[dict]]:
    """Every offer in the table's order; with `gpu` (a name or alias), that accelerator's
    alone, cheapest on-demand first (spot-only offers after, by spot price)."""
    headers = ["provider", "instance type", "accelerator", "GPUs", "region", "$/GPU-h on-demand",
               "$/GPU-h spot", "$/GPU-h 1y", "$/GPU-h 3y", "observed", "estimate"]

    def price(value):
        return "-" if value is None else f"{value:.2f}"

    table = every = load_offers()
    if gpu is not None:
        name = load_catalog().accelerators.get(gpu).name  # unknown: did you mean
        table = sorted((o for o in every if o.accelerator == name), key=lambda o: (
            o.on_demand_usd_per_gpu_hour is None,
            o.on_demand_usd_per_gpu_hour or o.spot_usd_per_gpu_hour or 0.0))
        if not table:
            sold = sorted({o.accelerator for o in every})
            raise InputError(f"no offer of {name} in the catalog",
                             fix=f"name one of the accelerators offered: {', '.join(sold)}; "
                                 "or add a row with its source to catalog/data/offers.csv")
    rows, data = [], []
    for o in table:
        gpus = "|".join(map(str, o.instance_sizes)) if o.sizes else o.count
        rows.append([o.provider, o.instance_type, o.accelerator, gpus, o.region or "-",
                     price(o.on_demand_usd_per_gpu_hour), price(o.spot_usd_per_gpu_hour),
                     price(o.reserved_1y_usd_per_gpu_hour), price(o.reserved_3y_usd_per_gpu_hour),
                     o.observed, "yes" if o.estimate else ""])
        data.append({**o.model_dump(mode="json"), **{  # the prices the table shows
            f"{p.replace('-', '_')}_usd_per_gpu_hour": o.usd_per_gpu_hour(p) for p in PRICINGS}})
    return headers, rows, data


def sibling_offers(name: str) -> str:
    """The other variants of the chip `name` (a catalog name) that the offers hold ('h100'
    names the SXM part; the NVL and PCIe cards are priced apart), as a line for
    `catalog offers --gpu`."""
    family = name.split("-")[0]
    counts: dict[str, int] = {}
    for o in load_offers():
        if o.accelerator != name and o.accelerator.split("-")[0] == family:
            counts[o.accelerator] = counts.get(o.accelerator, 0) + 1
    if not counts:
        return ""
    return (f"other {family} variants offered: "
            + ", ".join(f"{g} ({n})" for g, n in sorted(counts.items()))
            + "; list one with --gpu NAME")


def servers() -> tuple[list[str], list[list], list[dict]]:
    """The servers `infraplan tco` prices (catalog/data/onprem.yaml)."""
    from infraplan.economics.tco import load_onprem

    headers = ["name", "accelerator", "GPUs", "price $", "system power W", "estimate",
               "retrieved"]
    rows, data = [], []
    for s in load_onprem().servers:
        rows.append([s.name, s.accelerator, s.gpus_per_server, f"{s.price_usd:,.0f}",
                     f"{s.system_power_w:,.0f}", "yes" if s.estimate else "", s.retrieved])
        data.append(s.model_dump(mode="json"))
    return headers, rows, data


def regions() -> tuple[list[str], list[list], list[dict]]:
    """The electricity prices `infraplan tco --region` names (catalog/data/onprem.yaml)."""
    from infraplan.economics.tco import load_onprem

    headers = ["name", "aliases", "$/kWh", "year", "estimate", "retrieved"]
    rows, data = [], []
    for e in load_onprem().electricity:
        rows.append([e.name, ", ".join(e.aliases) or "-", f"{e.usd_per_kwh:.4f}", e.year,
                     "yes" if e.estimate else "", e.retrieved])
        data.append(e.model_dump(mode="json"))
    return headers, rows, data


LISTINGS = {"gpus": gpus, "models": models, "systems": systems, "networks": networks,
            "storage": storage, "engines": engines, "offers": offers, "prices": offers,
            "servers": servers, "regions": regions}
# lines under a listing's table, from the rows it shows
FOOTNOTES = {"storage": storage_footnotes, "offers": offers_footnotes,
             "prices": offers_footnotes}


def render(kind: str, listing: tuple | None = None, what: str | None = None) -> str:
    """The table of `listing` (the kind's whole listing when None), counted as `what`."""
    headers, rows, _ = listing or LISTINGS[kind]()
    numeric = [i for i, h in enumerate(headers) if any(u in h for u in (
        "GiB", "TB/s", "TFLOP", "W", "GB/s", "us", "ms", "$", "params", "active", "layers",
        "hidden", "context", "KV", "NICs", "max", "block", "overhead"))]
    label = what or kind
    if len(rows) == 1 and label.split()[0].endswith("s"):  # "1 offer of v100-sxm2-32gb"
        first, *rest = label.split(" ", 1)
        label = " ".join([first[:-1], *rest])
    notes = "".join(f"\n{line}" for line in FOOTNOTES.get(kind, lambda _: [])(rows))
    return table(headers, rows, align_right=numeric) + notes + f"\n\n{len(rows)} {label}; " \
        "every row has a source and a retrieval date (--json shows them)."
