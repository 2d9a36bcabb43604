"""A variant's `kbuild check-layers` record, as `kbuild publish` puts it beside the variant
(`layer-checks/<variant>.json`, kbuild/repo_layout.py) and as the hub page and `kbuild info` show
it (docs/formats.md, "Layer checks"): the one reader of it. Only what is shown is read; every other
key of the record is left as written."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass

MAX_BYTES = 4 << 20  # a record is tens of kilobytes: one larger is not read
_SHA256 = re.compile(r"^[0-9a-f]{64}\Z")
_MARK: dict[bool | None, str] = {True: "✓", False: "✗"}


class UnreadableRecord(ValueError):
    """The record is not one `kbuild check-layers` writes; the message says what is wrong."""


@dataclass(frozen=True)
class LayerCheck:
    metadata_sha256: str  # of the variant's metadata.json the check ran against
    forward: bool | None  # every forward row agreed; None: none was checked
    backward: bool | None
    transformers: str
    torch: str
    device: str  # "cpu", or the GPU's name ("NVIDIA H200")
    first_failure: str = ""  # "rotary_pos_emb (apply_rotary_transformers): grad of q differs, rel 0.77"

    def verdict(self) -> str:
        """`layers checked against transformers 5.25.0 (torch 2.13.0, cpu): forward ✓ backward ✗`."""
        parts = " ".join(f"{name} {_MARK.get(ok, 'not checked')}"
                         for name, ok in (("forward", self.forward), ("backward", self.backward)))
        return f"layers checked against transformers {self.transformers} (torch {self.torch}, {self.device}): {parts}"


def read_record(raw: bytes) -> LayerCheck:
    """The record's verdict and first difference; UnreadableRecord for anything else."""
    if len(raw) > MAX_BYTES:
        raise UnreadableRecord(f"{len(raw)} bytes, over {MAX_BYTES}")
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise UnreadableRecord(f"not JSON ({e})") from None
    if not isinstance(doc, dict):
        raise UnreadableRecord("not a JSON object")
    sha = doc.get("metadata_sha256")
    if not isinstance(sha, str) or not _SHA256.match(sha):
        raise UnreadableRecord("metadata_sha256 is not a sha256 in hex")
    verdict = doc.get("verdict")
    if not isinstance(verdict, dict) or any(verdict.get(k) not in (True, False, None) for k in ("forward", "backward")):
        raise UnreadableRecord('verdict is not {"forward": true|false|null, "backward": true|false|null}')
    rows = doc.get("rows", [])
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise UnreadableRecord("rows is not a list of objects")
    versions = {k: _short_string(doc, k) for k in ("transformers", "torch", "device")}
    gpu = doc.get("gpu")
    device = gpu if isinstance(gpu, str) and gpu and len(gpu) <= 100 else versions["device"]
    return LayerCheck(sha, verdict.get("forward"), verdict.get("backward"), versions["transformers"],
                      versions["torch"], device, _first_failure(rows))


def _short_string(doc: dict, key: str) -> str:
    value = doc.get(key)
    if not isinstance(value, str) or not value or len(value) > 100:
        raise UnreadableRecord(f"{key} is not a short string")
    return value


def _first_failure(rows: list[dict]) -> str:
    """The first layer quantity that differs, else the whole model's ("" when nothing differs):
    the model's rows follow from the layers'."""
    failed = [r for r in rows if r.get("ok") is False]
    first = next((r for r in failed if r.get("layer") != "model"), failed[0] if failed else None)
    if first is None:
        return ""
    layer = _text(first.get("layer"))
    where = "the whole model" if layer == "model" else f"{layer} ({_text(first.get('kernel_layer'))})"
    return f"{where}: {_text(first.get('quantity'))} differs, rel {_rel(first)}"


def _rel(row: dict) -> str:
    rel = row.get("rel")
    if isinstance(rel, (int, float)) and not isinstance(rel, bool) and math.isfinite(rel):
        return f"{rel:.2g}"
    return _text(row.get("why")) if row.get("why") else "missing"  # no figure: NaN, or one side has no tensor


def _text(value) -> str:
    return str(value)[:120] if value is not None else "?"
