"""The Markdown table of `kbuild bench --json` results, as bench/RESULTS.md shows them.

    python bench/results_table.py bench/gpu/results/run11/*.json            # print the table
    python bench/results_table.py --check bench/RESULTS.md bench/gpu/results/run11/*.json

RESULTS.md's tables of kbuild bench figures are made from the JSON files, never typed: `--check`
fails when the table in RESULTS.md differs from what the JSON says (tests/unit/test_results_table.py).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

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


def table(paths: list[Path]) -> str:
    return "\n".join([HEADER, *rows([json.loads(p.read_text()) for p in paths])])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", type=Path, metavar="RESULTS.md", help="fail unless this file holds the table")
    parser.add_argument("json", nargs="+", type=Path)
    args = parser.parse_args(argv)
    made = table(args.json)
    if args.check is None:
        print(made)
        return 0
    if made not in args.check.read_text():
        print(f"{args.check}: its table of {', '.join(map(str, args.json))} is not what the JSON says; expected:\n{made}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
