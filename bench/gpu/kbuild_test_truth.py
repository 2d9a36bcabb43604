"""The results table of bench/gpu/kbuild_test_truth.sh (issue 46): one row per variant `kbuild test`
reported, from its plain output (RUN/<name>.out, exit code in RUN/<name>.rc) and what each
suite's process saw (RUN/seen/*.json, written by bench/gpu/kbuild_test_seen.py).

    python bench/gpu/kbuild_test_truth.py RUN OUT     writes OUT/kbuild_test_truth.md and .json
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

STATUSES = ("passed", "failed", "skipped", "could not collect", "left out", "no tests")
ROW = re.compile(rf"^({'|'.join(STATUSES)}) +(\S+?)/(\S+) ([\d.]+)s (.*)$")
TESTING = re.compile(r"^testing (\S+?)/(\S+) (.*)$")
COUNTS = ("passed", "failed", "skipped", "error")


def rows(run: Path) -> list[dict]:
    seen = {p.stem: json.loads(p.read_text()) for p in (run / "seen").glob("*.json")}
    found = []
    for out in sorted(run.glob("*.out")):
        text = out.read_text(errors="replace")
        rc = (run / f"{out.stem}.rc").read_text().strip() if (run / f"{out.stem}.rc").is_file() else "?"
        said = {(m[1], m[2]): m[3] for m in map(TESTING.match, text.splitlines()) if m}
        matched = list(filter(None, map(ROW.match, text.splitlines())))
        if not matched and out.stem.startswith("test-"):  # cut at the deadline, or an error line
            last = (text.strip().splitlines() or ["no output"])[-1]
            found.append({"run": out.stem, "exit": rc, "kernel": "-", "variant": "-", "status": "no summary",
                          "kbuild said": "; ".join(said.values()) or "-", "suite saw": "-", "seen": None,
                          **{kind: 0 for kind in COUNTS}, "seconds": 0.0, "reason": last})
        for m in matched:
            status, kernel, variant, seconds, rest = m.groups()
            # kbuild test's own words after the dash; the dash may follow the seconds with one space
            # ("200.1s — timed out after 200 s (39 passed, ...)") or a log's path
            reason = (" " + rest).partition(" — ")[2]
            counts = {kind: 0 for kind in COUNTS}
            for n, kind in re.findall(r"(\d+) (passed|failed|skipped|errors?)\b", reason.split(";", 1)[0]):
                counts["error" if kind.startswith("error") else kind] += int(n)
            ran = status not in ("left out", "no tests")  # another run's record of it is not this row's
            saw = seen.get(f"{Path(kernel).name}__{variant}") if ran else None
            found.append({"run": out.stem, "exit": rc, "kernel": kernel, "variant": variant, "status": status,
                          "kbuild said": said.get((kernel, variant), "-"), "suite saw": _saw(saw), "seen": saw,
                          **counts, "seconds": float(seconds), "reason": reason})
    return found


def _saw(record: dict | None) -> str:
    if record is None:
        return "-"
    hidden = record.get("KBUILD_TEST_GPU_HIDDEN") == "1"
    devices = record["cuda_device_count"]
    if record["cuda_available"]:
        where = f"cuda ({devices} x {record['gpu']})"
    else:
        where = f"cpu ({devices} CUDA devices" + (f", CUDA_VISIBLE_DEVICES={record['CUDA_VISIBLE_DEVICES']!r})"
                                                  if hidden else ")")
    return where + (" [Triton interpreter]" if record.get("TRITON_INTERPRET") == "1" else "")


def table(found: list[dict]) -> str:
    head = ["run (exit)", "kernel", "variant", "kbuild said", "suite saw", "outcome", "passed", "failed", "skipped",
            "could not collect", "s", "reason"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in found:
        uncollected = str(r["error"]) + " error(s)" if r["status"] == "could not collect" else ""
        cells = [f"{r['run']} ({r['exit']})", r["kernel"], r["variant"], r["kbuild said"], r["suite saw"], r["status"],
                 r["passed"], r["failed"], r["skipped"], uncollected, f"{r['seconds']:.1f}", r["reason"][:200]]
        lines.append("| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: kbuild_test_truth.py RUN OUT", file=sys.stderr)
        return 2
    run, out = Path(argv[0]), Path(argv[1])
    found = rows(run)
    (out / "kbuild_test_truth.json").write_text(json.dumps(found, indent=1))
    (out / "kbuild_test_truth.md").write_text(table(found))
    print(table(found))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
