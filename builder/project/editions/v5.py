"""Edition 5 (kernel-builder 0.17, kernels-data's v5): the reader's own spelling. A kernel section
names its backend (`backend = "cuda"`); a Python-only kernel is a [torch-noarch] table, whose
capabilities kbuild reads as kernel-builder's documentation writes them (`cuda-capabilities`)."""

from __future__ import annotations

from builder.project.editions.reader import Reader


class Edition5(Reader):
    EDITION = 5
    RETIRED = {("general", "universal"): "edition 5 has no `universal`; use a [torch-noarch] table"}
