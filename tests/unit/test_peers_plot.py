"""bench/peers_plot.py draws kbuild's speed-up over each peer that was timed, row by row, into a
reproducible SVG per kernel."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RUN16 = REPO / "bench" / "gpu" / "results" / "run16" / "peers.json"


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
