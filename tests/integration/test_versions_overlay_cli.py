"""`kbuild variants` with an overlay versions table (KBUILD_VERSIONS): a made-up torch 2.16 row is
planned as torch216-* variants, and each of their lines says which file and line the row came from
(--json gives every row's origin, kbuild's own table included)."""

from __future__ import annotations

import json
from pathlib import Path

from builder.commands.main import main

ROOT = Path(__file__).resolve().parents[2]


def test_an_overlay_row_is_planned_and_named_with_its_origin(tmp_path, monkeypatch, capsys):
    overlay = tmp_path / "versions.toml"
    overlay.write_text('[default]\ntorch = ["2.15", "2.16"]\n\n[torch."2.16"]\nversion = "2.16.0"\ncuda = ["13.2"]\n')
    monkeypatch.setenv("KBUILD_VERSIONS", str(overlay))
    monkeypatch.setenv("KBUILD_CACHE", str(tmp_path / "cache"))
    assert main(["variants", str(ROOT / "kernels" / "rmsnorm")]) == 0
    lines = capsys.readouterr().out.splitlines()
    new = [line for line in lines if line.startswith("rmsnorm: torch216-")]
    assert len(new) == 2 and all(line.endswith(f"  [torch from {overlay}:4 (KBUILD_VERSIONS)]") for line in new), lines
    assert any(line.startswith("rmsnorm: torch215-cxx11-cpu-x86_64-linux  <- torch 2.15.0") and "[torch from" not in line
               for line in lines), lines

    assert main(["variants", str(ROOT / "kernels" / "rmsnorm"), "--json"]) == 0
    rows = {r["variant"]: r for r in json.loads(capsys.readouterr().out) if r["in_matrix"]}
    assert rows["torch216-cxx11-cu132-x86_64-linux"]["from"]["torch"] == f"{overlay}:4 (KBUILD_VERSIONS)"
    assert rows["torch216-cxx11-cu132-x86_64-linux"]["from"]["cuda"].startswith("builder/versions.toml:")
    assert rows["torch215-cxx11-cpu-x86_64-linux"]["from"]["torch"].startswith("builder/versions.toml:")
