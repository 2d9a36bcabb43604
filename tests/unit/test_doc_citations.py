"""The code cites only documents inside the repository: every `docs/<file>.md` a module, template,
test or benchmark names exists, every section it names (`docs/formats.md, "Variant names"`) is a
heading there, and builder/ and kbuild/ cite no document from outside the checkout (the shared
design notes beside it are not shipped)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CITATION = re.compile(r'docs/([\w.-]+\.md)(?:, "([^"\n]+)")?')
OUTSIDE = re.compile(r"\b(DESIGN|STYLE|ENVIRONMENT)\.md\b")


def sources(*folders: str):
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix in (".py", ".in", ".sh", ".toml") and "__pycache__" not in path.parts:
                yield path


def headings(doc: Path) -> set[str]:
    return {m[1].strip() for m in re.finditer(r"^#+ (.+)$", doc.read_text(encoding="utf-8"), re.M)}


def test_every_cited_document_and_section_exists():
    cited = 0
    for path in sources("builder", "kbuild", "kbuild_hub", "tests", "bench"):
        for m in CITATION.finditer(path.read_text(encoding="utf-8", errors="replace")):
            doc = ROOT / "docs" / m[1]
            where = f"{path.relative_to(ROOT)}: docs/{m[1]}"
            assert doc.is_file(), f"{where}: no such document"
            if m[2]:
                assert m[2] in headings(doc), f'{where}: no section "{m[2]}" (has: {sorted(headings(doc))})'
            cited += 1
    assert cited >= 10  # the formats are cited where they are implemented


def test_the_code_cites_no_document_outside_the_repository():
    found = [f"{path.relative_to(ROOT)}:{n}: {line.strip()}" for path in sources("builder", "kbuild", "kbuild_hub")
             for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
             if OUTSIDE.search(line)]
    assert not found, "\n".join(found)
