"""`kbuild bench --plot F.svg`: each workload's speed-up over its reference (the reference's
median time over the kernel's), one bar per workload and variant, drawn with matplotlib into a
reproducible SVG (no date, fixed ids) that a kernel page or a README can show."""

from __future__ import annotations

from pathlib import Path

from builder.verify.benchmarks import BenchRun


def plot_speedups(run: BenchRun, path: Path) -> int:
    """Writes the plot; returns how many bars it drew (workloads with a kernel and a reference time)."""
    import matplotlib

    matplotlib.use("Agg")  # no display: files only
    import matplotlib.pyplot as plt

    rows = [w for w in run.workloads if w.speedup is not None]
    variants = list(dict.fromkeys(w.variant for w in rows))
    labels = list(dict.fromkeys(f"{w.kernel} {w.cls}.{w.name}" for w in rows))
    with matplotlib.rc_context({"svg.hashsalt": "kbuild-bench", "svg.fonttype": "none"}):
        fig, ax = plt.subplots(figsize=(8, 1.2 + 0.45 * max(1, len(labels)) * max(1, len(variants))))
        height = 0.8 / max(1, len(variants))
        for n, variant in enumerate(variants):
            # every row has a speed-up; tested again here so that the values are floats to a type checker too
            mine = {f"{w.kernel} {w.cls}.{w.name}": w.speedup for w in rows
                    if w.variant == variant and w.speedup is not None}
            ys = [i + n * height for i, label in enumerate(labels) if label in mine]
            ax.barh(ys, [mine[label] for label in labels if label in mine], height=height, label=variant)
        ax.axvline(1.0, color="grey", linewidth=1, linestyle="--")
        ax.set_yticks([i + height * (len(variants) - 1) / 2 for i in range(len(labels))], labels)
        ax.invert_yaxis()
        ax.set_xlabel("speed-up over the reference (its median time / the kernel's; > 1: the kernel is faster)")
        if variants:
            ax.legend(loc="lower right", fontsize="small")
        ax.set_title("kbuild bench")
        fig.tight_layout()
        # "tight": the box grows to hold long workload names and the axis label, which
        # tight_layout alone left cut off at the right edge
        fig.savefig(path, format="svg", metadata={"Date": None}, bbox_inches="tight")
        plt.close(fig)
    return len(rows)
