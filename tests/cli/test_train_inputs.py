"""plan train's bad input at the terminal: one line naming the file and the field, exit 2."""

from __future__ import annotations

import pytest

from infraplan.cli import main

BASE = ("model: llama-3.1-8b\n"
        "training: {{tokens: 1.0e11, global_batch: 256, seq_len: 4096{training}}}\n"
        "hardware: {{gpus: [h100]{hardware}}}\n")


@pytest.mark.parametrize("training, hardware, expected", [
    (", storage: fsxx-nonexistent", ", counts: [16]",
     "s.yaml: training.storage unknown storage tier 'fsxx-nonexistent'; valid choices: "),
    ("", ", counts: [16], network: infiniband",
     "s.yaml: hardware.network unknown network 'infiniband'; did you mean 'ib-xdr-800', "
     "'ib-ndr-400', 'ib-hdr-200'? To fix: run 'infraplan catalog networks' to list them"),
    ("", ", counts: [16], system: dgx-h1000",
     "s.yaml: hardware.system unknown system 'dgx-h1000'; did you mean 'dgx-h100', "),
    ("", ", counts: [16], system: dgx-b200",
     "s.yaml: hardware.system node type 'dgx-b200' holds b200-sxm-180gb, not h100-sxm5-80gb; "
     "to fix: plan b200-sxm-180gb on it, or pick a node type that holds h100-sxm5-80gb"),
    ("", ", min_count: 64, max_count: 16", "s.yaml: hardware.min_count 64 exceeds max_count 16"),
])
def test_catalog_lookups_and_the_count_range_name_the_file_and_field(
        tmp_path, capsys, training, hardware, expected):
    """These were looked up only when the search ran, and read 'unknown system ...' with
    neither the file nor the field (an unknown GPU already read 'b03.yaml: hardware.gpus
    unknown accelerator ...')."""
    path = tmp_path / "s.yaml"
    path.write_text(BASE.format(training=training, hardware=hardware))
    code = main(["plan", "train", str(path)])
    captured = capsys.readouterr()
    assert code == 2 and "Traceback" not in captured.err
    assert captured.err.startswith(f"error: {expected}")
