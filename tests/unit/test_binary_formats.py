"""The seam between the library checks and the files they read (builder/toolchains/binary/,
docs/ARCHITECTURE.md): only its modules parse a binary file, and each format module answers every
question of the interface, so a new format is one module and a line of the table."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

from builder.toolchains.binary import FORMATS, BinaryFormat, for_os

ROOT = Path(__file__).resolve().parents[2]
SEAM = ROOT / "builder" / "toolchains" / "binary"
PARSERS = ("elftools",)  # what reads a library's bytes


def test_only_the_seam_parses_binary_files():
    found = []
    for path in sorted((ROOT / "builder").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            if any(n.split(".")[0] in PARSERS for n in names) and not path.is_relative_to(SEAM):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not found, f"a binary file parsed outside builder/toolchains/binary/: {', '.join(found)}"


def test_each_format_answers_every_question():
    questions = [name for name, _ in inspect.getmembers(BinaryFormat, inspect.isfunction) if not name.startswith("_")]
    for os, binary in FORMATS.items():
        assert binary.os == os and binary.name
        unanswered = [q for q in questions if getattr(type(binary), q) is getattr(BinaryFormat, q)]
        assert not unanswered, f"{binary.name} does not answer {', '.join(unanswered)}"
        assert for_os(os) is binary
