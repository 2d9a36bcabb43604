"""bench/RESULTS.md's table of `kbuild bench` figures says what the H200 run's JSON says: it is
made by bench/results_table.py, not typed."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RUN = REPO / "bench" / "gpu" / "results" / "run11"
JSON = [RUN / f"{k}.json" for k in ("activation", "rmsnorm", "rotary")]


def results_table():
    spec = importlib.util.spec_from_file_location("results_table", REPO / "bench" / "results_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_results_table_is_the_one_the_json_makes():
    assert results_table().main(["--check", str(REPO / "bench" / "RESULTS.md"), *map(str, JSON)]) == 0


def test_a_figure_that_differs_from_the_json_is_caught(tmp_path, capsys):
    edited = []
    for path in JSON:
        copy = tmp_path / path.name
        shutil.copy(path, copy)
        edited.append(copy)
    doc = json.loads(edited[1].read_text())
    doc["workloads"][0]["speedup"] = 9.99
    edited[1].write_text(json.dumps(doc))
    assert results_table().main(["--check", str(REPO / "bench" / "RESULTS.md"), *map(str, edited)]) == 1
    assert "9.99x" in capsys.readouterr().err


PEERS_BEFORE = REPO / "bench" / "gpu" / "results" / "run15" / "peers.json"
PEERS_AFTER = REPO / "bench" / "gpu" / "results" / "run16" / "peers.json"
PEERS_GRAPH = REPO / "bench" / "gpu" / "results" / "run18" / "peers.json"  # graph-timed


def test_the_peer_tables_are_the_ones_the_json_makes():
    results = str(REPO / "bench" / "RESULTS.md")
    assert results_table().main(["--check", results, str(PEERS_GRAPH)]) == 0
    assert results_table().main(["--check", results, str(PEERS_AFTER)]) == 0
    assert results_table().main(["--check", results, "--before", str(PEERS_BEFORE), str(PEERS_AFTER)]) == 0


def test_a_peer_figure_that_differs_from_the_json_is_caught(tmp_path, capsys):
    doc = json.loads(PEERS_AFTER.read_text())
    doc["rows"][0]["vs_best"] = 7.77
    edited = tmp_path / "peers.json"
    edited.write_text(json.dumps(doc))
    assert results_table().main(["--check", str(REPO / "bench" / "RESULTS.md"), str(edited)]) == 1
    assert "7.77x" in capsys.readouterr().err


def test_a_file_of_another_kind_is_one_line_naming_it(tmp_path):
    other = tmp_path / "ready_split.json"
    other.write_text(json.dumps({"rows": {"kbuild warm": {"find": 0.1}}}))
    with pytest.raises(SystemExit) as exit_:
        results_table().main([str(other)])
    assert exit_.value.code == f"results_table.py: {other} is neither kbuild bench --json nor bench/peers.py --json output"


FRONT = REPO / "bench" / "hub_front_load_results.json"


def test_the_hub_front_table_is_the_one_the_json_makes():
    assert results_table().main(["--check", str(REPO / "bench" / "RESULTS.md"), str(FRONT)]) == 0


def test_a_hub_front_figure_that_differs_from_the_json_is_caught(tmp_path, capsys):
    doc = json.loads(FRONT.read_text())
    doc["rows"][1]["seconds"] = 77.77
    edited = tmp_path / "hub_front_load_results.json"
    edited.write_text(json.dumps(doc))
    assert results_table().main(["--check", str(REPO / "bench" / "RESULTS.md"), str(edited)]) == 1
    assert "77.77 s" in capsys.readouterr().err


QWEN = REPO / "bench" / "gpu" / "results" / "run17" / "qwen_step.json"


def test_the_qwen_step_table_is_the_one_the_json_makes():
    assert results_table().main(["--check", str(REPO / "bench" / "RESULTS.md"), str(QWEN)]) == 0


def test_a_qwen_step_figure_that_differs_from_the_json_is_caught(tmp_path, capsys):
    doc = json.loads(QWEN.read_text())
    doc["configs"]["kbuild"]["step_s"] = 0.07777
    edited = tmp_path / "qwen_step.json"
    edited.write_text(json.dumps(doc))
    assert results_table().main(["--check", str(REPO / "bench" / "RESULTS.md"), str(edited)]) == 1
    assert "77.8 ms" in capsys.readouterr().err


RUN19 = REPO / "bench" / "gpu" / "results" / "run19"  # the H100 run of 2026-12-06
DIST = RUN19 / "dist_compile" / "dist_compile.json"
TRUTH = RUN19 / "kbuild_test_truth" / "retabled" / "kbuild_test_truth.json"
PEERS_H100 = RUN19 / "peers_rotary_graph" / "peers.json"


def test_the_h100_tables_are_the_ones_the_json_makes():
    results = str(REPO / "bench" / "RESULTS.md")
    for path in (DIST, TRUTH, PEERS_H100):
        assert results_table().main(["--check", results, str(path)]) == 0, path


def test_the_dist_compile_table_says_what_the_json_says(tmp_path, capsys):
    made = results_table().table([DIST])
    assert "| dist | sccache-dist: 2 build servers of 8 cores each; the client on the host, -j 18 | 320.0 s |" in made
    assert "dist/half 0.585x" in made and "| 64 | 357.6 s | 0.046x | client (compile 349.1 s, client 357.6 s) |" in made
    doc = json.loads(DIST.read_text())
    doc["rows"]["shared"]["compile_seconds"] = 77.7
    edited = tmp_path / "dist_compile.json"
    edited.write_text(json.dumps(doc))
    assert results_table().main(["--check", str(REPO / "bench" / "RESULTS.md"), str(edited)]) == 1
    assert "| 77.7 s |" in capsys.readouterr().err


def test_a_dist_compile_run_from_before_local_symbols_were_told_apart_is_tabled():
    """The smoke runs' objects have no `only_local_symbols_differ`: the table says only what they counted."""
    made = results_table().table([REPO / "bench" / "gpu" / "results" / "dist_compile_smoke" / "relu.json"])
    assert "Objects dist against local: 0 identical, 1 differ." in made
    assert "local symbols" not in made


def test_the_truth_table_is_kbuild_test_truths_own(tmp_path, capsys):
    found = json.loads(TRUTH.read_text())
    spec = importlib.util.spec_from_file_location("kbuild_test_truth", REPO / "bench" / "gpu" / "kbuild_test_truth.py")
    truth = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(truth)
    assert results_table().table([TRUTH]) + "\n" == truth.table(found)
    found[0]["reason"] = "a reason the run never gave"
    edited = tmp_path / "kbuild_test_truth.json"
    edited.write_text(json.dumps(found))
    assert results_table().main(["--check", str(REPO / "bench" / "RESULTS.md"), str(edited)]) == 1
    assert "a reason the run never gave" in capsys.readouterr().err


RELIABILITY = REPO / "bench" / "reliability_results.json"


def test_the_reliability_table_is_the_one_the_json_makes(tmp_path, capsys):
    assert results_table().main(["--check", str(REPO / "bench" / "RESULTS.md"), str(RELIABILITY)]) == 0
    doc = json.loads(RELIABILITY.read_text())
    doc["probes"][-1]["held"] = False
    edited = tmp_path / "reliability_results.json"
    edited.write_text(json.dumps(doc))
    assert results_table().main(["--check", str(REPO / "bench" / "RESULTS.md"), str(edited)]) == 1
    assert "| **fails** |" in capsys.readouterr().err
