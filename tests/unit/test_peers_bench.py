"""bench/peers.py's pure parts: the bytes a workload must move, kbuild's speed-ups over its peers
and the best of them, and the one-line argument errors."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def peers():
    spec = importlib.util.spec_from_file_location("bench_peers", REPO / "bench" / "peers.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_peers"] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    yield module
    del sys.modules["bench_peers"]


def test_bytes_moved_reads_each_input_and_writes_each_output_once(peers):
    t, h = 4096, 1024
    assert peers.bytes_moved("rms_norm", t, h, 2) == 2 * (t * h + h + t * h)
    assert peers.bytes_moved("fused_add_rms_norm", t, h, 2) == 2 * (3 * t * h + h + t * h)
    # backward: dy, x, w read; dx, dw written
    assert peers.bytes_moved("rms_norm_fwd_bwd", t, h, 2) == 2 * (2 * t * h + h) + 2 * (3 * t * h + 2 * h)
    assert peers.bytes_moved("silu_and_mul", t, h, 2) == 2 * (t * 2 * h + t * h)
    # 4096 hidden: 32 q heads, 8 k heads of 128; q and k read and written, cos and sin [t, 64] read
    assert peers.rotary_heads(4096) == (32, 8, 128)
    assert peers.bytes_moved("rotary_neox", t, 4096, 2) == 2 * (2 * t * 40 * 128 + 2 * t * 64)


def test_speedups_are_peer_time_over_kbuild_time_and_the_best_is_the_fastest_timed_peer(peers):
    r = peers.speedups(10.0, {"eager": 40.0, "torch.compile": 12.0, "liger": None, "torch op": 25.0})
    assert r["vs"] == {"eager": 4.0, "torch.compile": 1.2, "torch op": 2.5}
    assert (r["best_peer"], r["vs_best"]) == ("torch.compile", 1.2)
    assert peers.speedups(10.0, {"liger": None}) == {"vs": {}, "best_peer": None, "vs_best": None}
    assert peers.speedups(None, {"eager": 3.0})["best_peer"] is None


def test_a_peer_agrees_within_a_few_roundings_of_its_dtype(peers):
    import torch

    assert peers.agrees(0.03, 4.0, torch.bfloat16)
    assert not peers.agrees(0.5, 4.0, torch.bfloat16)
    assert not peers.agrees(0.02, 1.0, torch.float16)


@pytest.mark.parametrize("argv, says", [
    (["--tokens", "0,4"], "argument --tokens"),
    (["--hidden", "x"], "argument --hidden"),
    (["--dtypes", "fp8"], "argument --dtypes: unknown fp8"),
    (["--workloads", "softmax"], "argument --workloads: unknown softmax"),
    (["--variant-dir", "rmsnorm"], "argument --variant-dir"),
    (["--rounds", "0"], "argument --rounds"),
    (["--shapes", "4096"], "argument --shapes: expected TOKENSxHIDDEN"),
    (["--shapes", "1x4096", "--tokens", "8"], "argument --shapes: give either"),
    (["--timing", "graph"], "argument --timing: graph replays CUDA graphs"),
    (["--timing", "wall"], "argument --timing: invalid choice"),
])
def test_a_bad_argument_is_one_line_naming_it(peers, capsys, argv, says):
    with pytest.raises(SystemExit) as exit_:
        peers.parse_args(["--device", "cpu", *argv])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert says in err[-1] and "Traceback" not in "\n".join(err)


def test_a_missing_variant_folder_names_it_and_says_to_build_first(peers, tmp_path):
    with pytest.raises(peers.Unavailable, match=r"no built variant folder .*nowhere; build it first"):
        peers.load_kernels({"rmsnorm"}, "cpu", {"rmsnorm": tmp_path / "nowhere"})


def test_shapes_are_the_pairs_given_else_every_tokens_by_hidden(peers):
    assert peers.parse_args(["--device", "cpu", "--shapes", "1x4096, 4096x8192"]).shapes == [(1, 4096), (4096, 8192)]
    assert peers.parse_args(["--device", "cpu", "--tokens", "1,8", "--hidden", "64"]).shapes == [(1, 64), (8, 64)]


def test_under_graph_timing_a_peer_that_cannot_be_captured_is_absent_saying_why(peers):
    def time_one(call):
        return call()

    def uncapturable():
        raise RuntimeError("operation not permitted when stream is capturing\nmore detail")

    good, bad = peers.Peer("kbuild", call=lambda: 5.0), peers.Peer("eager", call=uncapturable)
    peers.take_turns([good, bad], 3, time_one, graph=True)
    assert good.us == 5.0 and bad.us is None and bad.call is None
    assert bad.absent == "not capturable in a CUDA graph: operation not permitted when stream is capturing"
    with pytest.raises(RuntimeError):  # timed as launched, a failure is a bug: it is not hidden
        peers.take_turns([peers.Peer("eager", call=uncapturable)], 1, time_one, graph=False)
