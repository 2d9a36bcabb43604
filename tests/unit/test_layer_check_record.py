"""kbuild/layer_check_record.py: a published `kbuild check-layers` record read as the hub page and
`kbuild info` show it, and anything else refused in one line."""

from __future__ import annotations

import json

import pytest

from kbuild.layer_check_record import MAX_BYTES, UnreadableRecord, read_record

SHA = "ab" * 32
ROWS = [
    {"layer": "model", "kernel_layer": "-", "dtype": "float32", "mode": "training", "part": "backward",
     "quantity": "grad of model.layers.0.self_attn.q_proj.weight", "rel": 0.85, "tolerance": 1e-3, "ok": False},
    {"layer": "rotary_pos_emb", "kernel_layer": "apply_rotary_transformers", "dtype": "float32", "mode": "training",
     "part": "forward", "quantity": "output 0", "rel": 0.0, "tolerance": 1e-4, "ok": True},
    {"layer": "rotary_pos_emb", "kernel_layer": "apply_rotary_transformers", "dtype": "float32", "mode": "training",
     "part": "backward", "quantity": "grad of q", "rel": 0.7723, "tolerance": 1e-4, "ok": False},
]


def record(**changes) -> bytes:
    doc = {"metadata_sha256": SHA, "verdict": {"forward": True, "backward": False}, "kernel": "k",
           "variant": "torch-cpu", "torch": "2.13.0", "transformers": "5.25.0", "device": "cpu", "gpu": None,
           "rows": ROWS, "notes": []}
    doc.update(changes)
    return json.dumps(doc).encode()


def test_the_verdict_and_the_first_layer_that_differs():
    check = read_record(record())
    assert check.metadata_sha256 == SHA
    assert check.verdict() == "layers checked against transformers 5.25.0 (torch 2.13.0, cpu): forward ✓ backward ✗"
    # the model's rows follow from the layers': the layer's row is named even though it comes later
    assert check.first_failure == "rotary_pos_emb (apply_rotary_transformers): grad of q differs, rel 0.77"


def test_a_gpu_is_named_an_unchecked_part_said_and_nothing_differing_leaves_no_line():
    check = read_record(record(device="cuda", gpu="NVIDIA H200", verdict={"forward": True, "backward": None},
                               rows=[r | {"ok": True} for r in ROWS]))
    assert check.verdict().endswith("(torch 2.13.0, NVIDIA H200): forward ✓ backward not checked")
    assert check.first_failure == ""


def test_only_the_model_differing_and_a_row_without_a_figure():
    rows = [ROWS[0] | {"rel": None, "why": "NaN"}]
    assert read_record(record(rows=rows)).first_failure == (
        "the whole model: grad of model.layers.0.self_attn.q_proj.weight differs, rel NaN")
    assert read_record(record(rows=[ROWS[2] | {"rel": None}])).first_failure.endswith("rel missing")


@pytest.mark.parametrize("raw, why", [
    (b"{", "not JSON"), (b"[]", "not a JSON object"), (b"\xff", "not JSON"),
    (record(metadata_sha256="ab"), "metadata_sha256"), (record(metadata_sha256=None), "metadata_sha256"),
    (record(verdict={"forward": "yes"}), "verdict"), (record(verdict=None), "verdict"),
    (record(rows={"a": 1}), "rows"), (record(rows=[1]), "rows"),
    (record(transformers=5), "transformers"), (record(torch="x" * 101), "torch"),
    (b" " * (MAX_BYTES + 1), "over"),
])
def test_anything_else_is_unreadable_in_one_line(raw, why):
    with pytest.raises(UnreadableRecord) as caught:
        read_record(raw)
    assert why in str(caught.value) and "\n" not in str(caught.value)
