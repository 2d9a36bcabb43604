"""kbuild's pytest plugin for `kbuild test`, loaded with `-p` from the suite's temporary folder:
writes why tests were skipped, grouped as pytest's `-rs` summary groups them, to the JSON-lines
file $KBUILD_SKIP_REASONS. A plugin, not `-rs`, so the suite's own `-r` setting stays as it is."""

import json
import os

_PREFIX = "Skipped: "


def pytest_terminal_summary(terminalreporter):
    out = os.environ.get("KBUILD_SKIP_REASONS")
    if not out:
        return
    here = terminalreporter.config.invocation_params.dir
    counts: dict[tuple[str, str], int] = {}  # (where, reason) -> how many tests
    for report in terminalreporter.stats.get("skipped", []):
        if not (isinstance(report.longrepr, tuple) and len(report.longrepr) == 3):
            continue
        path, line, reason = report.longrepr
        reason = reason[len(_PREFIX):] if reason.startswith(_PREFIX) else reason
        path = os.path.relpath(path, here) if os.path.isabs(path) else path
        key = (f"{path}:{line}" if line is not None else path, reason)
        counts[key] = counts.get(key, 0) + 1
    with open(out, "w", encoding="utf-8") as f:
        for (where, reason), count in counts.items():
            f.write(json.dumps({"count": count, "where": where, "reason": reason}) + "\n")
