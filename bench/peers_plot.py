"""Plots of a bench/peers.py run: one SVG per kernel, kbuild's speed-up over each timed peer
(the peer's median over kbuild's; > 1: kbuild is faster) for every workload, dtype and shape.

    python bench/peers_plot.py bench/gpu/results/run16/peers.json --out bench/gpu/results/run16/
    python bench/peers_plot.py bench/gpu/results/run16/peers.json --kernels kernels/

Writes `peers_<kernel>.svg` into --out for each kernel the run timed, and with --kernels DIR
`DIR/<kernel>/benchmarks/peers.svg`, which `kbuild publish` carries to the branch and the hub's
kernel page shows. Reproducible (no date, fixed ids). A log scale: 0.5x and 2x sit the same
distance from parity.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

# bench/peers.py's workloads by kernel, in its order
KERNELS = {
    "rmsnorm": ("rms_norm", "rms_norm_fwd_bwd", "fused_add_rms_norm", "fused_add_rms_norm_fwd_bwd"),
    "activation": ("silu_and_mul", "gelu_and_mul", "gelu_tanh_and_mul"),
    "rotary": ("rotary_neox", "rotary_gptj"),
}


def bars(doc: dict, kernel: str) -> tuple[list[str], dict[str, list[float | None]]]:
    """(row labels, {peer: kbuild's speed-up over it per row, None where it was not timed})."""
    rows = [r for r in doc["rows"] if r["workload"] in KERNELS[kernel] and r["kbuild"]["us"] is not None]
    labels = [f"{r['workload']} {r['dtype']} {r['tokens']}x{r['hidden']}" for r in rows]
    peers = [p for p in dict.fromkeys(name for r in rows for name in r["peers"]) if any(r["vs"].get(p) for r in rows)]
    return labels, {p: [r["vs"].get(p) for r in rows] for p in peers}


def plot(doc: dict, kernel: str, path: Path) -> int:
    """Writes the plot; returns how many rows it drew."""
    import matplotlib

    matplotlib.use("Agg")  # no display: files only
    import matplotlib.pyplot as plt

    labels, speedups = bars(doc, kernel)
    if not labels:
        return 0
    with matplotlib.rc_context({"svg.hashsalt": "kbuild-peers", "svg.fonttype": "none"}):
        fig, ax = plt.subplots(figsize=(9, 1.2 + 0.22 * len(labels) * max(1, len(speedups))))
        height = 0.8 / max(1, len(speedups))
        for n, (peer, values) in enumerate(speedups.items()):
            ys = [i + n * height for i, v in enumerate(values) if v]
            ax.barh(ys, [v for v in values if v], height=height, label=peer)
        ax.axvline(1.0, color="grey", linewidth=1, linestyle="--")
        ax.set_xscale("log")
        ax.set_yticks([i + height * (len(speedups) - 1) / 2 for i in range(len(labels))], labels, fontsize="small")
        ax.invert_yaxis()
        ax.set_xlabel("kbuild's speed-up over the peer (the peer's median / kbuild's; > 1: kbuild is faster)")
        ax.legend(loc="lower right", fontsize="small")
        ax.set_title(f"kbuild {kernel} beside its peers on {doc['gpu'] or doc['cpu']} ({doc['timing']})",
                     fontsize="medium")
        fig.savefig(path, format="svg", metadata={"Date": None}, bbox_inches="tight")
        plt.close(fig)
    return len(labels)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("json", type=Path, help="a bench/peers.py --json file")
    parser.add_argument("--out", type=Path, help="folder for the SVGs (peers_<kernel>.svg)")
    parser.add_argument("--kernels", type=Path, metavar="DIR",
                        help="a folder of kernel projects: writes DIR/<kernel>/benchmarks/peers.svg")
    args = parser.parse_args(argv)
    if not (args.out or args.kernels):
        parser.error("one of --out and --kernels is required")
    try:
        doc = json.loads(args.json.read_text())
    except (OSError, ValueError) as e:
        parser.error(f"argument json: cannot read {args.json}: {e}")
    if not (isinstance(doc, dict) and isinstance(doc.get("rows"), list) and "copy_gb_per_s" in doc):
        parser.error(f"argument json: {args.json} is not a bench/peers.py result (no rows and copy bandwidth)")
    if args.out and not args.out.is_dir():
        parser.error(f"argument --out: {args.out} is not a folder")
    if args.kernels and not args.kernels.is_dir():
        parser.error(f"argument --kernels: {args.kernels} is not a folder")
    timed = [kernel for kernel in KERNELS if bars(doc, kernel)[0]]
    for kernel in timed if args.kernels else ():
        if not (args.kernels / kernel / "build.toml").is_file():
            parser.error(f"argument --kernels: {args.kernels / kernel} is not a kernel project (no build.toml)")
    drawn = 0
    for kernel in timed:
        targets = [args.out / f"peers_{kernel}.svg"] if args.out else []
        if args.kernels:
            (args.kernels / kernel / "benchmarks").mkdir(exist_ok=True)
            targets.append(args.kernels / kernel / "benchmarks" / "peers.svg")
        for target in targets:
            rows = plot(doc, kernel, target)
            print(f"wrote {target} ({rows} rows)")
        drawn += rows
    if not drawn:
        print(f"{args.json}: no row with a kbuild time to draw", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
