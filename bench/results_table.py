"""The Markdown table of `kbuild bench --json`, `bench/peers.py --json`, bench/hub_front_load.py,
bench/gpu/qwen_step.py, bench/dist_compile.py, bench/gpu/kbuild_test_truth.py or bench/reliability.py
results, as bench/RESULTS.md shows them.

    python bench/results_table.py bench/gpu/results/run11/*.json            # print the table
    python bench/results_table.py --check bench/RESULTS.md bench/gpu/results/run11/*.json
    python bench/results_table.py bench/gpu/results/run15/peers.json        # kbuild beside its peers
    python bench/results_table.py --before bench/gpu/results/run15/peers.json bench/gpu/results/run16/peers.json
    python bench/results_table.py bench/hub_front_load_results.json          # the hub front's load run
    python bench/results_table.py bench/gpu/results/run17/qwen_step.json      # the Qwen3 training step
    python bench/results_table.py bench/gpu/results/run19/dist_compile/dist_compile.json  # distributed compiles
    python bench/results_table.py bench/gpu/results/run19/kbuild_test_truth/retabled/kbuild_test_truth.json
    python bench/results_table.py bench/reliability_results.json              # the trust campaign

RESULTS.md's tables of kbuild bench figures are made from the JSON files, never typed: `--check`
fails when the table in RESULTS.md differs from what the JSON says (tests/unit/test_results_table.py).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

HEADER = ("| kernel | variant | workload | kernel (median, min-max) | eager reference | speed-up | check |\n"
          "|---|---|---|---|---|---|---|")


def _us(ms: float) -> str:
    return f"{ms * 1e3:.1f}"


def rows(results: list[dict]) -> list[str]:
    out = []
    for doc in results:
        for w in doc["workloads"]:
            t, ref = w.get("timing"), w.get("reference")
            kernel = f"{_us(t['median_ms'])} us ({_us(t['min_ms'])}-{_us(t['max_ms'])})" if t else "-"
            reference = f"{_us(ref['median_ms'])} us" if ref else "-"
            speedup = f"{w['speedup']:.2f}x" if w.get("speedup") else "-"
            if w.get("error"):
                check = "error"
            else:
                check = {True: "matches", False: "differs", None: "no verify"}[w.get("verified")]
                if w.get("verified") is False and w.get("max_abs_diff") is not None:
                    check += f" (max diff {w['max_abs_diff']:.3g})"
            out.append(f"| {w['kernel']} | `{w['variant']}` | {w['class']}.{w['name']} | {kernel} | {reference} | "
                       f"{speedup} | {check} |")
    return out


# bench/peers.py's columns, in its order; a peer absent from every row of a run gets no column.
PEERS = ("eager", "torch.compile", "torch op", "liger", "liger (a, b)")


def peer_rows(docs: list[dict]) -> list[str]:
    """One line per (workload, dtype, shape): kbuild's median and each peer's with kbuild's speed-up
    over it, the best peer, and the bandwidth kbuild reached as a share of the measured copy."""
    present = [p for p in PEERS if any(r["peers"][p]["us"] is not None for d in docs for r in d["rows"])]
    out = ["| workload | dtype | tokens x hidden | kbuild us | "
           + " | ".join(f"{p} us (kbuild's speed-up)" for p in present)
           + " | vs best peer | % of copy | check |",
           "|---|---|---|---|" + "---|" * len(present) + "---|---|---|"]
    for doc in docs:
        for r in doc["rows"]:
            k = r["kbuild"]["us"]
            cells = [r["workload"], r["dtype"], f"{r['tokens']}x{r['hidden']}", "-" if k is None else f"{k:.1f}"]
            for name in present:
                us = r["peers"][name]["us"]
                cells.append("-" if us is None else f"{us:.1f} ({r['vs'][name]:.2f}x)")
            cells.append("-" if r["vs_best"] is None else f"**{r['vs_best']:.2f}x** {r['best_peer']}")
            cells.append(f"{r['pct_of_copy']:.0f}%" if r.get("pct_of_copy") is not None else "-")
            cells.append(r["check"])
            out.append("| " + " | ".join(cells) + " |")
    return out


def compare_rows(before: dict, after: dict) -> list[str]:
    """bench/peers.py's rows of two runs side by side, for the (workload, dtype, shape) both ran."""
    key = lambda r: (r["workload"], r["dtype"], r["tokens"], r["hidden"])  # noqa: E731
    old = {key(r): r for r in before["rows"]}
    out = ["| workload | dtype | tokens x hidden | kbuild us, before -> after | vs best peer, before -> after |",
           "|---|---|---|---|---|"]
    for r in after["rows"]:
        b = old.get(key(r))
        if b is None or b["kbuild"]["us"] is None or r["kbuild"]["us"] is None:
            continue
        vs = lambda row: "-" if row["vs_best"] is None else f"{row['vs_best']:.2f}x {row['best_peer']}"  # noqa: E731
        out.append(f"| {r['workload']} | {r['dtype']} | {r['tokens']}x{r['hidden']} | "
                   f"{b['kbuild']['us']:.1f} -> {r['kbuild']['us']:.1f} | {vs(b)} -> **{vs(r)}** |")
    return out


def front_rows(doc: dict) -> list[str]:
    """bench/hub_front_load.py's run: the direct row and the front's cold and warm rows with their
    ratios to it, then how the cold download streamed."""
    out = ["| run | wall (vs direct) | per-client MB/s, median (vs direct) | first byte, median (max) | "
           "serving hub's peak RSS MB, process alone (vs direct); with children | idle RSS MB | "
           "upstream's peak RSS MB, alone; with children | upstream GETs of the file | sha256 checked |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in doc["rows"]:
        vs = r.get("vs_direct")
        ratio = lambda key, vs=vs: f" ({vs[key]:.2f}x)" if vs else ""  # noqa: E731
        mine, up = r["serving_rss_mb"], r["upstream_rss_mb"]
        upstream = f"{up['peak_own']:.1f}; {up['peak']:.1f}" if vs else "(the serving hub)"
        first = r["first_byte_s"]
        out.append(f"| {r['run']} | {r['seconds']:.2f} s{ratio('seconds')} | "
                   f"{r['per_client_mb_s']['median']:.2f}{ratio('per_client_mb_s')} | "
                   f"{first['median']:.2f} s ({first['max']:.2f} s) | "
                   f"{mine['peak_own']:.1f}{ratio('serving_peak_rss_own')}; {mine['peak']:.1f} | "
                   f"{mine['idle_own']:.1f} | "
                   f"{upstream} | {r['upstream_file_gets']} | "
                   f"{r['verified']}/{r['clients']} |")
    for r in doc["rows"]:
        if get := r.get("upstream_get"):
            began = get["ended_after_clients_started_s"] - get["send_s"]
            out.append("")
            out.append(f"{r['run']}: the upstream sent the file once, in {get['send_s']:.2f} s, "
                       f"from {began:.2f} s to {get['ended_after_clients_started_s']:.2f} s after the first "
                       f"client's request; the first client byte reached its client at "
                       f"{get['first_client_byte_after_clients_started_s']:.2f} s, and "
                       f"{get['clients_with_first_byte_before_it_ended']} of {r['clients']} clients had their first "
                       f"byte before the upstream had sent its last.")
    return out


_GIB = 1 << 30


def qwen_rows(doc: dict) -> list[str]:
    """bench/gpu/qwen_step.py's run: each configuration's step time and peak beside Liger on the same
    layers and beside eager, then what held each peak."""
    configs = doc["configs"]
    same, eager = configs.get("liger_same"), configs.get("eager")
    ratio = lambda mine, theirs: f"{mine / theirs:.3f}x" if theirs else "-"  # noqa: E731
    out = [f"{doc['gpu']}, torch {doc['torch']}, {doc['dtype']}, batch {doc['batch']}, {doc['layers']} layers, "
           f"hidden {doc['hidden']}, vocab {doc['vocab']}; step time: median of {doc['steps'] - doc['warmup']} steps "
           f"after {doc['warmup']} warm-up",
           "",
           "| configuration | step | vs liger_same | vs eager | peak | vs liger_same | vs eager |",
           "|---|---|---|---|---|---|---|"]
    for name, c in configs.items():
        out.append(f"| {name} | {c['step_s'] * 1e3:.1f} ms | {ratio(c['step_s'], same and same['step_s'])} | "
                   f"{ratio(c['step_s'], eager and eager['step_s'])} | {c['peak_bytes'] / _GIB:.2f} GiB | "
                   f"{ratio(c['peak_bytes'], same and same['peak_bytes'])} | "
                   f"{ratio(c['peak_bytes'], eager and eager['peak_bytes'])} |")
    out += ["", "| at the peak, GiB | " + " | ".join(configs) + " |", "|---|" + "---|" * len(configs)]
    parts: list[tuple[str, Callable[[dict], float]]] = [
        ("parameters", lambda m: m["parameters"]), ("gradients", lambda m: m["gradients"]),
        ("AdamW state", lambda m: m["optimizer_state"]),
        ("saved activations", lambda m: m["saved_activations"]["total"])]
    groups = sorted({g for c in configs.values() for g in c["memory"]["saved_activations"]["by_group"]})

    def group(g: str) -> Callable[[dict], float]:
        return lambda m: m["saved_activations"]["by_group"].get(g, 0)

    parts += [(f"- {g}", group(g)) for g in groups]
    parts += [("unexplained (transients: float32 logits, workspaces)", lambda m: m["unexplained_at_peak"]),
              ("peak", lambda m: max(m["forward_peak"], m["backward_peak"], m["optimizer_peak"]))]
    for label, get in parts:
        out.append(f"| {label} | " + " | ".join(f"{get(c['memory']) / _GIB:.2f}" for c in configs.values()) + " |")
    return out


def dist_rows(doc: dict) -> list[str]:
    """bench/dist_compile.py's run: each row's wall time, busy CPU and the cache or distribution line
    kbuild printed, the objects compared, then the model of the release build (bench/dist_model.py)."""
    rows, machine = doc["rows"], doc["machine_cpus"]
    what = {"local": f"every core ({doc['host_cpus']}), fills a redis",
            "half": f"one machine of {machine} cores (taskset {rows.get('half', {}).get('cpus', '-')})",
            "dist": f"sccache-dist: 2 build servers of {machine} cores each; the client on the host",
            "shared": "a second machine (another folder, HOME and KBUILD_CACHE) reading local's redis"}
    measured = len(rows["local"]["units"]) if "local" in rows else "-"
    out = [f"{doc['kernel']}: {measured} units ({', '.join(f'`{u}`' for u in doc['units'])}) at {doc['cuda_archs']}; "
           f"host of {doc['host_cpus']} CPUs, a machine of {machine}",
           "",
           "| row | what | wall | busy CPU | cache or distribution |",
           "|---|---|---|---|---|"]
    for name, r in rows.items():
        busy = f"{r['busy_cpu_seconds']:.1f} s"
        if "servers_cpu_seconds" in r:
            busy += f" (servers {r['servers_cpu_seconds']:.1f} s)"
        out.append(f"| {name} | {what.get(name, name)}, -j {r['jobs']} | {r['compile_seconds']:.1f} s | {busy} | "
                   f"{r['line']} |")
    out.append("")
    out.append("Ratios of wall time: " + ", ".join(f"{k} {v:.3f}x" for k, v in doc["ratios"].items()) + ".")
    for name, same in doc["objects"].items():
        # runs before the harness told local symbols apart (dist_compile_smoke/) count those among `differ`
        local = same.get("only_local_symbols_differ")
        but_local = f"{len(local)} identical but for local symbols, " if local is not None else ""
        out.append(f"Objects {name.replace('_vs_', ' against ')}: {same['identical']} identical, {but_local}"
                   f"{len(same['differ'])} differ.")
    model = doc.get("model")
    if model:
        out += ["", f"The release build modelled ({model['units']} units x {len(model['variants'])} CUDA variants x "
                    f"{', '.join(str(len(a)) for a in model['variants'].values())} archs; a unit-arch "
                    f"{model['mean_unit_seconds']} core-s on average, the longest {model['longest_unit_seconds']}; "
                    f"client {model['client_cpu_per_job_seconds']} CPU-s and overhead "
                    f"{model['overhead_per_job_seconds']} s per job):",
                "",
                f"| machines of {model['cores_per_machine']} cores | modelled wall | x one machine | bound |",
                "|---|---|---|---|"]
        for n, f in model["machines"].items():
            bound = f["bound"] if n == "1" else (f"{f['bound']} (compile {f['compile_seconds']} s, "
                                                 f"client {f['client_seconds']} s)")
            out.append(f"| {n} | {f['seconds']:.1f} s | {f['ratio']:.3f}x | {bound} |")
    return out


def truth_rows(found: list[dict]) -> list[str]:
    """bench/gpu/kbuild_test_truth.py's rows, in the table that script writes."""
    spec = importlib.util.spec_from_file_location("kbuild_test_truth",
                                                  Path(__file__).resolve().parent / "gpu" / "kbuild_test_truth.py")
    assert spec is not None and spec.loader is not None  # a .py path always gets a spec with a loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.table(found).splitlines()


def reliability_rows(doc: dict) -> list[str]:
    """bench/reliability.py's run: each probe's attempts, its outcomes counted, and whether it held."""
    out = ["| probe | attempts | outcomes | |", "|---|---|---|---|"]
    for r in doc["probes"]:
        outcomes = ", ".join(f"{name} ×{n}" for name, n in r["outcomes"].items())
        out.append(f"| {r['probe']} | {r['attempts']} | {outcomes} | {'held' if r['held'] else '**fails**'} |")
    return out


def kind_of(path: Path) -> tuple[str, Any]:
    """("peers", "bench" or "front", the document: a JSON object, a list for "truth") of a results file; a one-line
    error for anything else."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise SystemExit(f"results_table.py: cannot read {path}: {e}") from None
    if isinstance(doc, dict) and doc.get("bench") == "hub_front_load" and isinstance(doc.get("rows"), list):
        return "front", doc
    if isinstance(doc, dict) and isinstance(doc.get("rows"), dict) and "local" in doc["rows"] and "ratios" in doc:
        return "dist", doc
    if isinstance(doc, dict) and isinstance(doc.get("probes"), list) and "kbuild" in doc:
        return "reliability", doc
    if isinstance(doc, list) and doc and all(isinstance(r, dict) and "kbuild said" in r for r in doc):
        return "truth", doc
    if isinstance(doc, dict) and isinstance(doc.get("configs"), dict) and "hidden" in doc:
        return "qwen", doc
    if isinstance(doc, dict) and isinstance(doc.get("rows"), list) and "copy_gb_per_s" in doc:
        return "peers", doc
    if isinstance(doc, dict) and isinstance(doc.get("workloads"), list):
        return "bench", doc
    raise SystemExit(f"results_table.py: {path} is neither kbuild bench --json nor bench/peers.py --json output")


def table(paths: list[Path], before: Path | None = None) -> str:
    kinds, docs = zip(*(kind_of(p) for p in paths), strict=True)
    if before is not None:
        earlier = kind_of(before)
        if len(docs) != 1 or kinds[0] != "peers" or earlier[0] != "peers":
            raise SystemExit("results_table.py: --before compares one bench/peers.py JSON with another")
        return "\n".join(compare_rows(earlier[1], docs[0]))
    if len(set(kinds)) > 1:
        raise SystemExit("results_table.py: give results of one kind: kbuild bench, bench/peers.py, "
                         "bench/hub_front_load.py, bench/gpu/qwen_step.py, bench/dist_compile.py, "
                         "bench/gpu/kbuild_test_truth.py or bench/reliability.py JSON")
    single: dict[str, tuple[str, Callable[[Any], list[str]]]] = {
        "front": ("bench/hub_front_load.py", front_rows), "qwen": ("bench/gpu/qwen_step.py", qwen_rows),
        "dist": ("bench/dist_compile.py", dist_rows), "truth": ("bench/gpu/kbuild_test_truth.py", truth_rows),
        "reliability": ("bench/reliability.py", reliability_rows)}
    if kinds[0] in single:
        script, make = single[kinds[0]]
        if len(docs) != 1:
            raise SystemExit(f"results_table.py: give one {script} run")
        return "\n".join(make(docs[0]))
    if kinds[0] == "peers":
        return "\n".join(peer_rows(list(docs)))
    return "\n".join([HEADER, *rows(list(docs))])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", type=Path, metavar="RESULTS.md", help="fail unless this file holds the table")
    parser.add_argument("--before", type=Path, metavar="PEERS.json",
                        help="a bench/peers.py run to compare the one given with, row by row")
    parser.add_argument("json", nargs="+", type=Path)
    args = parser.parse_args(argv)
    made = table(args.json, args.before)
    if args.check is None:
        print(made)
        return 0
    if made not in args.check.read_text():
        print(f"{args.check}: its table of {', '.join(map(str, args.json))} is not what the JSON says; "
              f"expected:\n{made}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
