"""Edition 5 (kernel-builder 0.17, kernels-data's v5): the reader's own spelling. A kernel section
names its backend (`backend = "cuda"`); a Python-only kernel is a [torch-noarch] table. What only
edition 6 has (`language`, `build-layout`) is refused saying so, since a file that uses it most
likely only lacks `edition = 6`."""

from __future__ import annotations

from builder.project.editions.reader import Reader

_EDITION_6 = "set [general] edition = 6 to use it"


class Edition5(Reader):
    EDITION = 5
    RETIRED = {("general", "universal"): "edition 5 has no `universal`; use a [torch-noarch] table",
               ("general", "build-layout"): f"build-layout is edition 6's; {_EDITION_6}"}

    def _missing_selector(self, keys, body: dict) -> None:
        language = body.get("language")
        if isinstance(language, str) and language.startswith("cpp-"):
            self._fail(keys + ("language",), f'language is edition 6\'s; {_EDITION_6}, or write backend = '
                       f'"{language.removeprefix("cpp-")}"')
            return
        super()._missing_selector(keys, body)
