"""bench/gpu/'s device harnesses share one sourced set-up, bench/gpu/harness.sh (issue 47, item 5), read
as text here (tests/integration/test_gpu_harness_runs.py runs it): every script sources it, says on its
second line what the device tool must carry for it and checks that before anything else, runs in a
clean copy of the checkout, and repeats none of what the harness holds; the README lists each one."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
GPU = REPO / "bench" / "gpu"
HARNESS = GPU / "harness.sh"
SCRIPTS = sorted(p for p in GPU.glob("*.sh") if p != HARNESS)
SOURCE = "source bench/gpu/harness.sh || exit 1"
# collect.sh only reads /tmp/run, which a detached run wrote: nothing carried, no copy of the checkout
NO_COPY = {"collect.sh"}


def code(script: Path) -> list[str]:
    """The script's lines that run (not its comments)."""
    return [line for line in script.read_text().splitlines() if line.strip() and not line.lstrip().startswith("#")]


def carry_paths(script: Path) -> list[str]:
    line = script.read_text().splitlines()[1]
    return line.removeprefix("# carry:").split("(")[0].split()


def test_the_scripts_are_the_harnesses_the_readme_lists():
    names = {p.name for p in SCRIPTS}
    assert {"peers.sh", "corpus.sh", "collect.sh", "kbuild_test_truth.sh"} <= names
    assert not [n for n in names if n.startswith("rmsnorm_crash")], "issue 2's bisect scripts are retired"
    readme = (GPU / "README.md").read_text()
    assert [n for n in sorted(names) if f"`{n}`" not in readme] == []


def test_each_script_says_on_its_second_line_what_to_carry():
    for script in SCRIPTS:
        lines = script.read_text().splitlines()
        assert lines[0] == "#!/usr/bin/env bash", script.name
        assert lines[1].startswith("# carry: "), f"{script.name}: line 2 is {lines[1]!r}"
        assert sum(line.startswith("# carry:") for line in lines) == 1, f"{script.name}: one carry line"
        paths = carry_paths(script)
        assert paths and len(paths) <= 8, f"{script.name}: the device tool carries 8 paths at most"
        assert paths == ["nothing"] or all(re.fullmatch(r"(\.device|kernels/\w+/build)(/[\w.-]+)*", p) for p in paths), \
            f"{script.name}: {paths}"


def test_each_script_sources_the_harness_checks_its_carry_first_and_runs_in_a_clean_copy():
    for script in SCRIPTS:
        lines = code(script)
        assert SOURCE in lines, f"{script.name}: does not source the harness"
        start = lines.index(SOURCE)
        assert start <= 1, f"{script.name}: sources the harness after other work"  # `set -uo pipefail` may come first
        if script.name in NO_COPY:
            assert carry_paths(script) == ["nothing"]
            continue
        check = next((n for n, line in enumerate(lines) if re.search(r"\b(carried|needs) ", line + " ")), None)
        assert check is not None, f"{script.name}: never checks what it needs carried (carried, needs)"
        before = [line for line in lines[start + 1:check] if re.search(r"\b(rm -rf|snapshot|wheels|fresh_run|cp) ", line)]
        assert before == [], f"{script.name}: set-up before the carry check: {before}"
        assert any(re.search(r"\bsnapshot\b", line) for line in lines), f"{script.name}: no clean copy (snapshot)"


def test_no_script_repeats_the_set_up_the_harness_holds():
    repeated = {
        "pip install": "wheels",
        "git init": "as_repo",
        "hub serve": "hub_serve",
        "token_hex": "hub_token",
        "NCCL_NVLS_ENABLE": "device_env",
        "PYTHONPATH=$PWD:/tmp/site": "device_env",
        "kbuild() {": "device_env (kbuild on PATH)",
        "cp -r . /tmp/snap": "snapshot",
        "driver_version": "gpu_line",
        "lane_setup.sh": "the harness (lane_setup.sh is gone)",
    }
    found = [f"{s.name}: {what} (use {use})" for s in SCRIPTS for what, use in repeated.items()
             if any(what in line for line in code(s))]
    assert found == []


def test_each_function_of_the_harness_says_why_it_is_there():
    lines = HARNESS.read_text().splitlines()
    functions = [(n, m[1]) for n, line in enumerate(lines) if (m := re.match(r"^(\w+)\(\) \{", line))]
    assert {"carried", "needs", "snapshot", "wheels", "device_env", "hub_token", "hub_serve", "say", "bring_back"} \
        <= {name for _, name in functions}
    for n, name in functions:
        above = lines[n - 1]
        assert above.startswith("#") or re.match(r"^\w+\(\) \{.*\}$", above), f"harness.sh: {name} has no comment above it"


def test_no_script_cites_the_shared_folder_beside_the_checkout():
    # a pattern, not the path itself: tests/integration/test_fresh_clone.py refuses a test that names it
    beside = re.compile(r"\.\./shared\b")
    assert [s.name for s in [HARNESS, *SCRIPTS, GPU / "README.md"] if beside.search(s.read_text())] == []
