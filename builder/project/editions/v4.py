"""Edition 4: a build.toml without `[general] edition`. As edition 5, but `version` and `license`
are required and a Python-only kernel may be spelled `universal = true` instead of a
[torch-noarch] table. Read as edition 5 (what kernel-builder 0.17 upgraded it to), with a notice
that `kbuild update-build` rewrites it."""

from __future__ import annotations

from builder.project.editions.reader import GENERAL
from builder.project.editions.v5 import Edition5
from builder.project.model import display
from kbuild_common.notices import notice


class Edition4(Edition5):
    EDITION = 5  # read as edition 5, as kernel-builder 0.17 did; provenance records the same
    GENERAL = {**GENERAL, "universal": "bool"}
    REQUIRED = ("name", "backends", "version", "license")
    RETIRED = {key: why for key, why in Edition5.RETIRED.items() if key != ("general", "universal")}  # 4 has it

    def universal(self, general: dict) -> bool:
        return bool(general.get("universal"))

    def noticed(self, general: dict) -> None:
        if not self.notify:
            return
        version = general.get("version")
        read = f" (its `version = {version}` is the kernel's major version, not the format's)" \
            if isinstance(version, int) and not isinstance(version, bool) else ""
        notice(f"{display(self.path)}: edition 4 manifest (no [general] edition){read}, upgraded to edition 5 "
               "in memory; run `kbuild update-build` to rewrite it as edition 6")
