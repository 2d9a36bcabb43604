"""Which variants `kbuild publish` carries a layer check for: the variant's latest `kbuild
check-layers` record (`.kbuild/<variant>/layer-check.json`) when it is of the build being published,
that is when its `metadata_sha256` is the sha256 of the variant's metadata.json. A record of an
earlier build is left out with one line saying so; the record uploaded is the copy checked."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path

from builder.layout import LAYER_CHECK, WORK_DIR
from kbuild.layer_check_record import UnreadableRecord, read_record


def with_layer_checks(root: Path, variants: list, scratch: Path, reporter) -> list:
    """`variants` (publish.LocalVariant), each with its record attached where it has a current one."""
    found = []
    for v in variants:
        record = root / WORK_DIR / v.name / LAYER_CHECK
        if not record.is_file():
            found.append(v)
            continue
        try:
            raw = record.read_bytes()
            check = read_record(raw)
        except (OSError, UnreadableRecord) as e:
            reporter.info(f"{v.name}: layer check not published: {record} is unreadable ({e})")
            found.append(v)
            continue
        if check.metadata_sha256 != hashlib.sha256((v.path / "metadata.json").read_bytes()).hexdigest():
            reporter.info(f"{v.name}: layer check not published: {record} is of an earlier build (its "
                          f"metadata.json differs); run kbuild check-layers {root} again to publish one")
            found.append(v)
            continue
        copy = scratch / f"{v.name}.{LAYER_CHECK}"
        copy.write_bytes(raw)
        found.append(replace(v, layer_check=copy))
    return found
