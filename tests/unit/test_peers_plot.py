"""bench/peers_plot.py draws kbuild's speed-up over each peer that was timed, row by row, into a
reproducible SVG per kernel."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RUN16 = REPO / "bench" / "gpu" / "results" / "run16" / "peers.json"
RUN18 = REPO / "bench" / "gpu" / "results" / "run18" / "peers.json"
RUN19 = REPO / "bench" / "gpu" / "results" / "run19" / "peers_rotary_graph" / "peers.json"  # H100, rotary only


@pytest.fixture(scope="module")
def peers_plot():
    spec = importlib.util.spec_from_file_location("peers_plot", REPO / "bench" / "peers_plot.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bars_are_the_speedups_of_the_json_and_untimed_peers_get_none(peers_plot):
    doc = json.loads(RUN16.read_text())
    labels, speedups = peers_plot.bars(doc, "activation")
    first = next(r for r in doc["rows"] if r["workload"] == "silu_and_mul")
    assert labels[0] == f"silu_and_mul {first['dtype']} {first['tokens']}x{first['hidden']}"
    assert speedups["torch.compile"][0] == first["vs"]["torch.compile"]
    assert "torch op" not in speedups  # no fused gated-activation op in torch: never timed, no bar
    gelu = labels.index(f"gelu_and_mul {first['dtype']} {first['tokens']}x{first['hidden']}")
    assert speedups["liger"][gelu] is None  # Liger has no erf GELU gate


def test_the_svg_is_the_same_bytes_each_time(peers_plot, tmp_path):
    doc = json.loads(RUN16.read_text())
    assert peers_plot.plot(doc, "rotary", tmp_path / "a.svg") == 16
    peers_plot.plot(doc, "rotary", tmp_path / "b.svg")
    assert (tmp_path / "a.svg").read_bytes() == (tmp_path / "b.svg").read_bytes()


def test_a_file_that_is_not_a_peers_run_is_one_line_naming_it(peers_plot, tmp_path, capsys):
    for n, doc in enumerate(({"workloads": []}, {"rows": {"kbuild warm": {}}})):  # kbuild bench; ready_split
        other = tmp_path / f"other{n}.json"
        other.write_text(json.dumps(doc))
        with pytest.raises(SystemExit) as exit_:
            peers_plot.main([str(other), "--out", str(tmp_path)])
        assert exit_.value.code == 2
        assert "is not a bench/peers.py result" in capsys.readouterr().err.strip().splitlines()[-1]


def test_kernels_puts_each_plot_in_the_kernel_projects_benchmarks(peers_plot, tmp_path, capsys):
    for kernel in ("rmsnorm", "activation", "rotary"):
        (tmp_path / kernel).mkdir()
        (tmp_path / kernel / "build.toml").write_text("")
    assert peers_plot.main([str(RUN16), "--kernels", str(tmp_path)]) == 0
    for kernel in ("rmsnorm", "activation", "rotary"):
        drawn = tmp_path / kernel / "benchmarks" / "peers.svg"
        peers_plot.plot(json.loads(RUN16.read_text()), kernel, tmp_path / "again.svg")
        assert drawn.read_bytes() == (tmp_path / "again.svg").read_bytes()
    # the committed plots are each kernel's newest run's: regenerate them when the run changes. rmsnorm's
    # and activation's are the H200's graph-timed run18; rotary's the H100's run19 (its kernel changed since)
    for run, kernels in ((RUN18, ("rmsnorm", "activation")), (RUN19, ("rotary",))):
        assert peers_plot.main([str(run), "--kernels", str(tmp_path)]) == 0
        for kernel in kernels:
            assert (REPO / "kernels" / kernel / "benchmarks" / "peers.svg").read_bytes() == \
                (tmp_path / kernel / "benchmarks" / "peers.svg").read_bytes(), kernel


def test_kernels_names_a_folder_that_is_no_kernel_project(peers_plot, tmp_path, capsys):
    (tmp_path / "rmsnorm").mkdir()
    with pytest.raises(SystemExit) as exit_:
        peers_plot.main([str(RUN16), "--kernels", str(tmp_path)])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "argument --kernels:" in err and "is not a kernel project (no build.toml)" in err
    assert not list(tmp_path.rglob("*.svg"))  # nothing half-written
    with pytest.raises(SystemExit):
        peers_plot.main([str(RUN16)])
    assert "one of --out and --kernels is required" in capsys.readouterr().err
