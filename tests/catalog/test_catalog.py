"""The shipped catalog: provenance on every row, names and aliases, and physical sanity."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest
import yaml

from infraplan.catalog import DATA_DIR, accelerator, load_catalog
from infraplan.catalog.engines import Engine
from infraplan.catalog.schema import Accelerator, System
from infraplan.catalog.table import load_table
from infraplan.economics.offers import load_offers
from infraplan.errors import InputError, UnknownNameError
from infraplan.models import load_model
from infraplan.units import GiB, TERA, parse_quantity
from tests.conftest import folded_text

CATALOG = load_catalog()
TABLES = ["accelerators", "systems", "networks", "storage", "models", "memory_overheads"]

REQUIRED_GPUS = ["h100-sxm5-80gb", "h100-pcie-80gb", "h200-sxm-141gb", "b200", "a100-sxm4-40gb",
                 "a100-sxm4-80gb", "v100-sxm2-32gb", "l40s", "l4", "a10g", "t4", "rtx-4090",
                 "mi300x", "mi325x", "tpu-v5e", "tpu-v5p", "tpu-v6e", "cpu-server"]
REQUIRED_MODELS = ["llama-2-7b", "llama-2-13b", "llama-2-70b", "llama-3.1-8b", "llama-3.1-70b",
                   "llama-3.1-405b", "mistral-7b", "mixtral-8x7b", "qwen2.5-7b", "qwen2.5-72b",
                   "deepseek-v3", "gpt3-175b", "nemotron-4-340b"]


@pytest.mark.parametrize("table", TABLES)
def test_every_row_names_its_source_and_date(table):
    rows = list(getattr(CATALOG, table))
    assert rows
    for row in rows:
        assert len(row.source) > 10, row.name
        assert dt.date(2020, 1, 1) <= row.retrieved <= dt.date.today(), row.name


def test_required_accelerators_and_models_are_shipped():
    for name in REQUIRED_GPUS:
        accelerator(name)
    for name in REQUIRED_MODELS:
        load_model(name)


@pytest.mark.parametrize("alias, name", [("h100", "h100-sxm5-80gb"),
                                         ("H100-SXM", "h100-sxm5-80gb"),
                                         ("h100_sxm5", "h100-sxm5-80gb"),
                                         ("A100-SXM4-80GB", "a100-sxm4-80gb")])
def test_aliases_resolve_ignoring_case_and_separators(alias, name):
    assert accelerator(alias).name == name


def test_a_miss_suggests_close_names():
    with pytest.raises(UnknownNameError) as err:
        accelerator("h100-sxm-80g")
    assert "did you mean" in str(err.value) and "h100-sxm5-80gb" in str(err.value)


def test_a_miss_names_each_row_once_by_its_canonical_name():
    """'lama-3.1-8b' offered 'llama-3.1-8b', 'llama3.1-8b' and 'llama-3-8b': two spellings
    of one model; a miss with no close match listed Hugging Face aliases first."""
    with pytest.raises(UnknownNameError) as close:
        CATALOG.models.get("lama-3.1-8b")
    assert "did you mean 'llama-3.1-8b', 'llama-3-8b', 'llama-3.1-70b'?" in str(close.value)
    with pytest.raises(UnknownNameError) as far:
        CATALOG.models.get("zzzz")
    listed = str(far.value).split("valid choices: ")[1].split(", ...")[0].split(", ")
    assert len(listed) == 12 and set(listed) <= set(CATALOG.models.names())


@pytest.mark.parametrize("gpu", list(CATALOG.accelerators), ids=lambda g: g.name)
def test_accelerator_figures_are_physically_sane(gpu: Accelerator):
    assert 8 * GiB <= gpu.memory_bytes <= 1024 * GiB
    assert 0.1e12 <= gpu.memory_bandwidth_bytes_per_s <= 20e12
    assert 20 <= gpu.tdp_watts <= 1500
    sixteen = gpu.peak_flops.get("bf16") or gpu.peak_flops.get("fp16")
    assert sixteen and 10 * TERA <= sixteen <= 5000 * TERA
    # dense, not "with sparsity": fp8 about 2x the 16-bit rate (L40S datasheet: 733 vs
    # 362.05, 2.02x), never the 4x a sparsity figure would give; fp32 below 16-bit
    if "fp8" in gpu.peak_flops:
        assert gpu.peak_flops["fp8"] <= 2.1 * sixteen
    if "fp32" in gpu.peak_flops and gpu.form_factor != "cpu":
        assert gpu.peak_flops["fp32"] < sixteen
    # the L2 serves re-read data faster than HBM does, or it would not be worth caching
    if gpu.l2_bandwidth_bytes_per_s is not None:
        assert gpu.memory_bandwidth_bytes_per_s < gpu.l2_bandwidth_bytes_per_s <= 20e12


def test_gh100_l2_is_the_whole_cache_figure_scaled_from_the_measured_card():
    """Chips and Cheese measured 3.8 TB/s over all 50 MB of an H100 PCIe (114 SMs, 1755 MHz
    boost); the SXM part and H200 (same GH100 die, 132 SMs at 1980 MHz) scale it."""
    pcie, sxm, h200 = accelerator("h100-pcie-80gb"), accelerator("h100"), accelerator("h200")
    assert (pcie.compute_units, sxm.compute_units) == (114, 132)
    assert pcie.l2_bandwidth_bytes_per_s == pytest.approx(3.8e12)
    assert sxm.l2_bandwidth_bytes_per_s == pytest.approx(
        pcie.l2_bandwidth_bytes_per_s * 132 / 114 * 1980 / 1755, rel=0.01)
    assert h200.l2_bandwidth_bytes_per_s == sxm.l2_bandwidth_bytes_per_s


def test_h100_matches_the_datasheet():
    h100 = accelerator("h100")
    assert h100.peak_flops["bf16"] == pytest.approx(989.4e12)
    assert h100.peak_flops["fp8"] == pytest.approx(1978.9e12)
    assert h100.memory_bandwidth_bytes_per_s == pytest.approx(3.35e12)
    assert h100.scale_up_link.bandwidth_bytes_per_s_per_direction == pytest.approx(450e9)


def test_peak_lookup_never_swaps_bf16_and_fp16():
    """V100 and T4 have no bf16 tensor cores; an fp8 model on A100 runs at the 16-bit rate."""
    with pytest.raises(InputError, match="no peak FLOP/s for 'bf16'"):
        accelerator("v100-sxm2-32gb").peak_flops_for("bf16")
    assert accelerator("v100-sxm2-32gb").peak_flops_for("fp16") == pytest.approx(125e12)
    assert accelerator("a100-sxm4-80gb").peak_flops_for("fp8") == pytest.approx(312e12)


def test_systems_point_at_existing_rows():
    CATALOG.check_references()
    assert CATALOG.system_for("h100").accelerators_per_node == 8


def test_every_accelerator_has_a_node_to_run_in():
    """Planning and simulating need a default node (links, NICs) for each chip: an
    accelerator without a system row could be named in a scenario and fail at run time."""
    missing = [a.name for a in CATALOG.accelerators
               if not any(s.accelerator == a.name for s in CATALOG.systems)]
    assert missing == []
    nvl = CATALOG.system_for("h100-nvl")
    assert (nvl.accelerators_per_node, nvl.intra_node_fabric) == (2, "nvlink-bridge")


@pytest.mark.parametrize("domain", [4, 70, 2])
def test_an_nvlink_domain_must_hold_whole_nodes(tmp_path, domain):
    """A rack-scale NVLink domain is a whole number of nodes, more than one; the error names
    the file, the row and the field."""
    rows = [r for r in yaml.safe_load((DATA_DIR / "systems.yaml").read_text())
            if r["name"] == "dgx-gb200-nvl72"]
    assert rows[0]["scale_up_domain_accelerators"] == 72
    rows[0]["scale_up_domain_accelerators"] = domain
    bad = tmp_path / "systems.yaml"
    bad.write_text(yaml.safe_dump(rows))
    with pytest.raises(InputError, match=r"systems.yaml: system 'dgx-gb200-nvl72'.*"
                                         rf"scale_up_domain_accelerators \({domain}\) must be a "
                                         r"multiple of accelerators_per_node \(4\)"):
        load_table(bad, System, "system")


def test_validation_models_resolve_from_the_csv_folder():
    folder = Path(__file__).parents[2] / "validation"
    for config in (folder / "models").glob("*.json"):
        assert load_model(f"models/{config.name}", base_dir=folder)


def test_a_broken_row_names_file_row_and_field(tmp_path):
    rows = yaml.safe_load((DATA_DIR / "accelerators.yaml").read_text())[:1]
    rows[0]["memory_bytes"] = "80 GiB/s"
    bad = tmp_path / "accelerators.yaml"
    bad.write_text(yaml.safe_dump(rows))
    with pytest.raises(InputError, match=r"accelerators.yaml: accelerator 'h100-sxm5-80gb': "
                                         r"memory_bytes"):
        load_table(bad, Accelerator, "accelerator")


@pytest.mark.parametrize("text, dimension, value", [
    ("80 GiB", "bytes", 80 * 2**30), ("80GB", "bytes", 80e9), ("3.35 TB/s", "bytes_per_s",
                                                               3.35e12),
    ("400 Gb/s", "bytes_per_s", 50e9), ("989.4 TFLOP/s", "flops", 989.4e12),
    ("1,979 TOP/s", "flops", 1979e12), ("700 W", "watts", 700), ("2 us", "seconds", 2e-6),
    (12.5, "bytes", 12.5)])
def test_quantities_parse_to_si(text, dimension, value):
    assert parse_quantity(text, dimension) == pytest.approx(value)


@pytest.mark.parametrize("text, dimension", [("80 GiB", "bytes_per_s"), ("fast", "bytes"),
                                             ("3 parsecs", "bytes"), ("80 G", "bytes")])
def test_bad_quantities_say_what_is_expected(text, dimension):
    with pytest.raises(InputError, match="To fix"):
        parse_quantity(text, dimension)


def test_the_readme_counts_what_the_catalog_ships():
    """The README's catalog paragraph counts rows; adding a row must update it."""
    readme = folded_text()
    offers = load_offers()
    providers = {"eight": 8, "nine": 9, "ten": 10}
    quoted = re.search(r"lists the shipped data: (\d+) accelerators .*? (\d+) model "
                       r"architectures, .*? (\d+) dated cloud offers \(on-demand, spot and "
                       r"reserved prices of (\w+) providers\)", readme)
    assert quoted, "the README's catalog paragraph changed shape"
    accelerators, models, dated, named = quoted.groups()
    assert (int(accelerators), int(models), int(dated), providers.get(named)) == (
        len(CATALOG.accelerators), len(CATALOG.models), len(offers),
        len({o.provider for o in offers}))


def test_a_per_sequence_overhead_range_must_run_forwards(tmp_path):
    """An engine's per-sequence CPU cost covers releases from `since` up to `until`; a range
    that ends before it starts fails the catalog load, naming the row and the releases."""
    rows = [r for r in yaml.safe_load((DATA_DIR / "engines.yaml").read_text())
            if r["name"] == "vllm"]
    assert rows[0]["step_overhead_per_sequence"][0]["until"] == "0.6"
    rows[0]["step_overhead_per_sequence"][0]["since"] = "0.7"
    bad = tmp_path / "engines.yaml"
    bad.write_text(yaml.safe_dump(rows))
    with pytest.raises(InputError, match=r"engines.yaml: engine 'vllm'.*since '0.7' must be "
                                         r"an earlier release than until '0.6'"):
        load_table(bad, Engine, "engine")


def test_per_sequence_overhead_ranges_must_not_overlap(tmp_path):
    """Each release has one per-sequence CPU cost: a second range reaching into the first
    fails the load; one that starts where the first ends is accepted and priced."""
    rows = [r for r in yaml.safe_load((DATA_DIR / "engines.yaml").read_text())
            if r["name"] == "vllm"]
    ranges = rows[0]["step_overhead_per_sequence"]
    ranges.append(dict(since="0.5", until="0.8", seconds="10 us", source="a test range"))
    bad = tmp_path / "engines.yaml"
    bad.write_text(yaml.safe_dump(rows))
    with pytest.raises(InputError, match=r"engine 'vllm'.*the range up to '0.6' overlaps"):
        load_table(bad, Engine, "engine")
    ranges[-1]["since"] = "0.6"
    bad.write_text(yaml.safe_dump(rows))
    vllm = load_table(bad, Engine, "engine").get("vllm")
    assert vllm.overhead_s_per_sequence("0.5.4") == pytest.approx(90e-6)
    assert vllm.overhead_s_per_sequence("0.7.3") == pytest.approx(10e-6)
    assert vllm.overhead_s_per_sequence("0.8.0") == 0.0


def test_an_engines_default_block_size_must_be_one_it_takes(tmp_path):
    """A row's block_sizes rule holds its own default, and gives sizes or powers of two."""
    rows = [r for r in yaml.safe_load((DATA_DIR / "engines.yaml").read_text())
            if r["name"] in ("vllm", "tensorrt-llm")]
    bad = tmp_path / "engines.yaml"
    rows[1]["block_size"] = 48
    bad.write_text(yaml.safe_dump(rows))
    with pytest.raises(InputError, match=r"engine 'tensorrt-llm'.*block_size 48 is not one of "
                                         r"its own block_sizes \(a power of two\)"):
        load_table(bad, Engine, "engine")
    rows[1]["block_size"] = 64
    rows[0]["block_sizes"]["powers_of_two"] = True
    bad.write_text(yaml.safe_dump(rows))
    with pytest.raises(InputError, match=r"engine 'vllm'.*give either listed sizes or "
                                         r"powers_of_two: true"):
        load_table(bad, Engine, "engine")


def test_host_time_ranges_are_per_host_cpu_and_may_stay_open(tmp_path):
    """TensorRT-LLM's host floor holds from 1.0 on, the newest release included (no
    `until`), once per host CPU: a second x86 range from 1.2 overlaps the open one and fails
    the load; a Grace range over the same releases does not; a range with neither bound is
    refused."""
    rows = [r for r in yaml.safe_load((DATA_DIR / "engines.yaml").read_text())
            if r["name"] == "tensorrt-llm"]
    ranges = rows[0]["host_time_per_sequence"]
    assert {(r["since"], r.get("until"), r["host_cpu"]) for r in ranges} == {
        ("1.0", None, "grace"), ("1.0", None, "x86")}
    trtllm = CATALOG.engines.get("tensorrt-llm")
    assert trtllm.host_s_per_sequence(None, "grace") == pytest.approx(29.4e-6)
    assert trtllm.host_s_per_sequence("1.2.0rc2", "x86") == pytest.approx(13.8e-6)
    assert trtllm.host_s_per_sequence("0.21", "x86") == 0.0
    bad = tmp_path / "engines.yaml"
    ranges.append(dict(since="1.2", host_cpu="x86", seconds="5 us", source="a test range"))
    bad.write_text(yaml.safe_dump(rows))
    with pytest.raises(InputError, match=r"host_time_per_sequence \(x86 hosts\): the range "
                                         r"with no until overlaps"):
        load_table(bad, Engine, "engine")
    ranges[-1] = dict(since="0.9", until="1.0", host_cpu="grace", seconds="5 us",
                      source="a test range")
    bad.write_text(yaml.safe_dump(rows))
    assert load_table(bad, Engine, "engine").get("trtllm").host_s_per_sequence(
        "0.9", "grace") == pytest.approx(5e-6)
    del ranges[-1]["since"], ranges[-1]["until"]
    bad.write_text(yaml.safe_dump(rows))
    with pytest.raises(InputError, match="a release range needs since, until or both"):
        load_table(bad, Engine, "engine")


def test_grace_hosts_are_the_gh200_gb200_and_gb300_nodes():
    """Every node whose accelerator sits beside a Grace CPU on one module says so; the rest
    keep the x86 default."""
    grace = {s.name for s in CATALOG.systems if s.host_cpu == "grace"}
    assert grace == {s.name for s in CATALOG.systems
                     if s.accelerator.startswith(("gh200", "gb200", "gb300"))}
    assert grace == {"lambda-gpu-1x-gh200", "gh200-144gb-1x-server", "gh200-nvl2-144gb",
                     "dgx-gb200-nvl72", "dgx-gb300-nvl72"}


def test_the_engine_listing_states_each_release_rule():
    """`infraplan catalog engines` shows the per-sequence costs beside the fixed one."""
    from infraplan.report.catalog import engines

    _, rows, _ = engines()
    overhead = {row[0]: row[-1] for row in rows}
    assert overhead["vllm"] == "2 (+0.09 a sequence, before 0.6)"
    assert overhead["tensorrt-llm"] == ("1 (at least 0.0294 a sequence on grace, from 1.0) "
                                        "(at least 0.0138 a sequence on x86, from 1.0)")
    block = {row[0]: row[3] for row in rows}
    assert block == {"vllm": "16 (1, 8, 16, 32, 64, 128, 256)",
                     "tensorrt-llm": "32 (a power of two)", "lmdeploy": "64", "sglang": "1"}
    kv_memory = {row[0]: row[5] for row in rows}
    assert kv_memory["tensorrt-llm"] == "0.95 of free (static batches 0.9 paged, from 0.10)"
    assert kv_memory["vllm"] == "0.90 of total"


def test_the_storage_listing_shows_write_totals_beside_read_totals():
    """EFS reads at 20 GiB/s in all but writes at 1 GiB/s: a 988 GB checkpoint takes
    about 920 s, not the 46 s its read total suggested when the write total was hidden."""
    from infraplan.report.catalog import storage

    headers, rows, _ = storage()
    column = {h: i for i, h in enumerate(headers)}
    row = {r[0]: r for r in rows}
    efs = row["aws-efs-elastic"]
    assert efs[column["read / write GB/s total"]] == "21.5 / 1.07"  # 20 and 1 GiB/s in GB/s
    assert efs[column["read / write GB/s/node"]] == "1.57 / 1.57"  # 1,500 MiB/s
    assert row["ddn-exascaler-ai400x2"][column["read / write GB/s total"]] == "360 / 260"
    assert row["local-nvme-8x-u2"][column["read / write GB/s total"]] == "scales with nodes"


def test_s3_writes_a_checkpoint_no_faster_than_one_prefix_takes_puts():
    """It wrote 988 GB from 64 nodes in 1.33 s (12.5 GB/s per node, no cap), 8x faster
    than FSx at 100 GB/s. AWS documents >= 3,500 PUT/s and 5,500 GET/s per partitioned
    prefix; the S3 Connector for PyTorch uploads 8 MiB parts: one prefix takes 29.4 GB/s
    of writes, 46.1 GB/s of reads, and the listing says what its total stands for."""
    from infraplan.reliability.checkpoint import transfer_time_s
    from infraplan.report.catalog import render

    s3 = CATALOG.storage.get("s3-standard")
    part = 8 * 2**20
    write_s = transfer_time_s(987.75e9, s3, 64)
    assert write_s == pytest.approx(0.1 + 987.75e9 / (3_500 * part), rel=1e-12)  # 33.7 s
    assert transfer_time_s(987.75e9, s3, 64, write=False) == pytest.approx(
        0.1 + 987.75e9 / (5_500 * part), rel=1e-12)
    fsx = CATALOG.storage.get("fsx-lustre-p2-1000")
    assert write_s > transfer_time_s(987.75e9, fsx, 64)
    # one node alone is still bounded by its own 100 Gb/s
    assert transfer_time_s(100e9, s3, 1) == pytest.approx(0.1 + 100e9 / 12.5e9)
    listing = render("storage")
    assert "46.1 / 29.4 *" in listing
    assert "* s3-standard total: one S3 prefix not yet partitioned" in listing

def test_static_batches_reach_the_executor_from_0_10_when_a_release_is_named(tmp_path):
    """TensorRT-LLM 0.10 moved static batches onto the in-flight batcher: a release from
    0.10 gets the rule, an older one the contiguous cache, and a deployment that names no
    release the contiguous cache its published static tables measured; the other engines'
    offline APIs always use their scheduler, at their own cache share; a second range
    reaching into the first fails the load."""
    trtllm = CATALOG.engines.get("tensorrt-llm")
    assert trtllm.static_batch_executor("0.11.0").kv_memory_fraction == pytest.approx(0.90)
    assert trtllm.static_batch_executor("1.2.0rc2") is not None
    assert trtllm.static_batch_executor("0.9.0") is None
    assert trtllm.static_batch_executor(None) is None
    # vLLM's LLM.generate() schedules a batch like any other requests, in every release
    for engine in ("vllm", "sglang", "lmdeploy"):
        for version in ("0.4.0", None):
            rule = CATALOG.engines.get(engine).static_batch_executor(version)
            assert rule is not None and rule.kv_memory_fraction is None
    rows = [r for r in yaml.safe_load((DATA_DIR / "engines.yaml").read_text())
            if r["name"] == "tensorrt-llm"]
    rows[0]["executor_static_batches"].append(
        dict(since="0.12", kv_memory_fraction=0.95, source="a test range"))
    bad = tmp_path / "engines.yaml"
    bad.write_text(yaml.safe_dump(rows))
    with pytest.raises(InputError, match=r"executor_static_batches: the range with no until "
                                         r"overlaps"):
        load_table(bad, Engine, "engine")
