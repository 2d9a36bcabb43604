"""The terminal summary and live view rendered in-process: every string as it is, capped skip reasons."""

from __future__ import annotations

import io
import re
import time
from pathlib import Path

import pytest
from rich.console import Console, Group

from builder.report import Reporter, VariantResult, _View
from builder.verify.kernel_tests import skip_reasons

STABLE_CPU = "torch-stable-abi210-cpu-x86_64-linux"
HOSTILE = "[/] [bold]x[/bold] :x: [link=http://e]y[/link] \\[z]"  # markup, an emoji code, escapes


# -- rendering (pure) -------------------------------------------------------------------------


def _reporter(monkeypatch, columns: int) -> tuple[Reporter, io.StringIO]:
    monkeypatch.setenv("COLUMNS", str(columns))
    buffer = io.StringIO()
    return Reporter(plain=False, stream=buffer), buffer


@pytest.mark.parametrize("columns", [40, 80, 200])
def test_the_summary_shows_every_string_as_it_is_and_cuts_no_name(monkeypatch, tmp_path, columns):
    reporter, buffer = _reporter(monkeypatch, columns)
    deep = tmp_path / ("a-long-folder-name-" * 4) / "build" / STABLE_CPU
    results = [
        # "unchanged" had no colour: `[]unchanged[/]` was a MarkupError on every no-op rebuild
        VariantResult("relu-stable", STABLE_CPU, "unchanged", 0.0, path=deep, log=deep / "build.log",
                      toolchain=f"torch 2.14.1 ({HOSTILE})", floor=f"needs {HOSTILE}"),
        VariantResult(f"k{HOSTILE}", "torch-stable-abi210-cu130-x86_64-linux", "skipped", 1.5, log=deep / "test.log",
                      reason=f"4 skipped {HOSTILE}", details=(f"skipped 4: tests/t.py:3: no CUDA device {HOSTILE}",)),
        VariantResult("relu-stable", "torch-cuda", "failed", 2.0, log=deep / "build.log", reason=f"a.cu:3: {HOSTILE}",
                      details=(f"  {HOSTILE}", "    ^")),
    ]
    reporter.summary(results, f"kbuild {HOSTILE}")
    out = buffer.getvalue()
    assert "…" not in out
    for text in (STABLE_CPU, "torch-stable-abi210-cu130-x86_64-linux", str(deep), f"log {deep / 'build.log'}",
                 f"torch 2.14.1 ({HOSTILE})", f"needs {HOSTILE}", f"4 skipped {HOSTILE}",
                 f"skipped 4: tests/t.py:3: no CUDA device {HOSTILE}", f"a.cu:3: {HOSTILE}", f"  {HOSTILE}",
                 f"full log {deep / 'build.log'}", f"k{HOSTILE}/torch-stable-abi210-cu130-x86_64-linux"):
        assert text in out, (text, out)
    # the table folds names at 40 columns, and keeps them on one line where they fit
    if columns >= 80:
        assert re.search(rf"│ relu-stable\s+│ {STABLE_CPU}\s+│ unchanged\s+│", out), out


def test_messages_are_shown_as_they_are(monkeypatch):
    reporter, buffer = _reporter(monkeypatch, 80)
    reporter.info(HOSTILE)
    reporter.result(HOSTILE)
    reporter.compiler_output(HOSTILE)  # not verbose: nothing
    assert buffer.getvalue() == f"{HOSTILE}\n{HOSTILE}\n"


def test_the_live_view_shows_phases_steps_and_the_slowest_running_one(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    console = Console(file=io.StringIO(), width=80, markup=False, emoji=False, highlight=False)
    view = _View(console)
    # a relative name: an absolute one under a long temporary folder (pytest-xdist's popen-gwN/) would
    # not fit the 80 columns, and the markup this checks would be cut off
    view.add_task(f"planning {Path(HOSTILE)}", total=None, phase=True)
    view.add_task("compiling", total=7, completed=3)
    view.add_task(f"  {STABLE_CPU}", total=3, variant=True)
    now = time.monotonic()
    view.running = ((f"NVCC {tmp_path / 'relu_cuda/relu.cu'} ({STABLE_CPU})", now - 75),
                    (f"CXX {tmp_path / 'b.cpp'} ({STABLE_CPU})", now - 3))
    console.print(Group(*view.get_renderables()))
    out = console.file.getvalue()
    assert "⠋ planning" in out and "[/] [bold]x[/bold] :x:" in out and "[link=http:/e]y[/link] \\[z]" in out
    assert re.search(r"compiling .* 3/7 ", out) and re.search(rf"^    {STABLE_CPU} .* 0/3 ", out, re.M), out
    # the oldest running step, its path from here, its variant whole, the others counted
    assert re.search(rf"running 1m1[56]s: NVCC relu_cuda/relu\.cu \({STABLE_CPU}\)\s+\(and 1 more\)", out), out
    assert "…" not in out


def test_skip_reasons_are_capped(tmp_path):
    many = tmp_path / "skips.jsonl"
    many.write_text("".join(f'{{"count": 1, "where": "tests/t.py:{n}", "reason": "r{n}"}}\n' for n in range(12)))
    assert len(skip_reasons(many)) == 11 and skip_reasons(many)[-1] == "and 2 more skip reason(s)"
    assert skip_reasons(tmp_path / "none.jsonl") == ()  # the suite never got to its summary
