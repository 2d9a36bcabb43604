"""How fast `kbuild hub serve` answers its pages, beside its JSON API over the same data (issue 23).

    python bench/hub_pages.py [--repos 200] [--versions 5] [--rounds 30] [--out FILE.json]

A fresh local hub of --repos kernel repos with --versions `vN` branches each (every version three
variants with a real metadata.json, every other version a `kbuild bench` result; a card on main)
is served by the real `kbuild hub serve` (a subprocess). Each page is fetched once cold (what the
server derives from a commit is then kept) and --rounds times warm; its JSON counterpart — the API
requests a client makes to learn the same things — is timed the same way in the same run:

- the index `/` (every kernel: newest version, date, variant count)  vs  `GET /api/kernels`
  (the names alone, the least the API answers);
- a kernel page `/<org>/<name>` (versions, variant grids, benchmarks, card)  vs  `/api/kernels/<id>/refs`
  and `tree/<vN>/build?recursive=true` for each version;
- a variant page  vs  its `tree/<vN>/build/<variant>` listing and its metadata.json;
- the fit page  vs  the same listing and metadata.json.

Prints a table of median / p95 per page and the ratio page/API; writes JSON (default
bench/hub_pages_results.json). The target: every warm page within 50 ms.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO)]

from kbuild_hub.gitstore import FileAdd, GitStore  # noqa: E402

TARGET_MS = 50.0
VARIANTS = ("torch-stable-abi210-cu130-x86_64-linux", "torch214-cxx11-cpu-x86_64-linux",
            "torch213-cxx11-cpu-x86_64-linux")
CARD = "# {name}\n\nA kernel of the page benchmark.\n\n```python\nget_kernel(\"{repo}@v1\")\n```\n"


def variant_files(name: str, variant: str, seed: int) -> list[FileAdd]:
    files = {"__init__.py": f"from ._ops import ops  # {seed}\n".encode(), "_ops.py": b"ops = None\n",
             f"_{name}_{seed:x}.abi3.so": os.urandom(4096)}
    archs = ["8.0", "9.0a", "10.0"] if "-cu" in variant else []
    meta = {"name": name, "id": f"_{name}_{seed:x}", "version": 1, "license": "Apache-2.0", "python-depends": [],
            "backend": {"type": "cuda" if archs else "cpu", "archs": archs},
            "digest": {"algorithm": "sha256", "files": {p: f"sha-{seed}-{p}" for p in files}},
            "abi": {"glibc": "2.34", "glibcxx": "3.4.29", "manylinux": "manylinux_2_34_x86_64"},
            "provenance": {"kernel-builder": {"name": "kbuild", "version": "0.1.0"},
                           "kernel": {"commit": f"{seed:040x}", "dirty": False}}}
    return [FileAdd(f"build/{variant}/{p}", d) for p, d in files.items()] + \
        [FileAdd(f"build/{variant}/metadata.json", json.dumps(meta).encode())]


def bench_results(name: str) -> bytes:
    workloads = [{"kernel": name, "variant": VARIANTS[0], "script": "benchmark.py", "class": "Bench", "name": w,
                  "device": "cuda", "timing": {"min_ms": 0.5, "median_ms": 0.6, "max_ms": 0.9},
                  "reference": {"min_ms": 1.1, "median_ms": 1.2, "max_ms": 1.5}, "verified": True, "error": "",
                  "speedup": 2.0} for w in ("small", "large")]
    return json.dumps({"workloads": workloads, "machines": {}, "skipped": []}).encode()


def make_hub(root: Path, repos: int, versions: int) -> list[str]:
    store = GitStore(root)
    ids = []
    for r in range(repos):
        repo_id = f"org{r % 10}/kernel{r:03d}"
        name = f"kernel{r:03d}"
        store.create_repo("kernel", repo_id)
        card = FileAdd("README.md", CARD.format(name=name, repo=repo_id).encode())
        main = store.commit("kernel", repo_id, "main", add=[card], message="card", parent=None)
        for v in range(1, versions + 1):
            adds = [f for variant in VARIANTS for f in variant_files(name, variant, r * 100 + v)]
            if v % 2:
                adds.append(FileAdd("benchmarks/results/results.json", bench_results(name)))
            store.commit("kernel", repo_id, f"v{v}", add=adds, message=f"v{v}", parent=None, create_branch_from=main)
        ids.append(repo_id)
    return ids


class Client:
    """One keep-alive connection, as a browser or huggingface_hub's session holds."""

    def __init__(self, port: int):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)

    def get(self, path: str) -> float:
        start = time.perf_counter()
        self.conn.request("GET", path)
        response = self.conn.getresponse()
        response.read()
        elapsed = time.perf_counter() - start
        if response.status != 200:
            raise SystemExit(f"GET {path}: {response.status}")
        return elapsed

    def get_all(self, paths: list[str]) -> float:
        return sum(self.get(p) for p in paths)


def timings(client: Client, paths: list[str], rounds: int) -> dict:
    cold = client.get_all(paths)
    warm = sorted(client.get_all(paths) for _ in range(rounds))
    return {"cold_ms": round(cold * 1e3, 2), "median_ms": round(statistics.median(warm) * 1e3, 2),
            "p95_ms": round(warm[min(len(warm) - 1, int(len(warm) * 0.95))] * 1e3, 2),
            "min_ms": round(warm[0] * 1e3, 2)}


def wait_until_up(port: int, child: subprocess.Popen) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if child.poll() is not None:
            said = child.stderr.read().decode()[-2000:] if child.stderr else ""
            raise SystemExit(f"kbuild hub serve exited with {child.returncode}: {said}")
        try:
            Client(port).get("/api/kernels")
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit("kbuild hub serve did not start in 60 s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repos", type=int, default=200)
    parser.add_argument("--versions", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "hub_pages_results.json")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="kbuild-pages-bench-") as tmp:
        root = Path(tmp) / "hub"
        start = time.perf_counter()
        ids = make_hub(root, args.repos, args.versions)
        made = time.perf_counter() - start
        print(f"hub of {args.repos} repos x {args.versions} versions made in {made:.0f} s", flush=True)
        token = Path(tmp) / "token"
        token.write_text("kb_bench_token\n")
        token.chmod(0o600)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        child = subprocess.Popen([sys.executable, "-m", "builder.commands.main", "hub", "serve", "--root", str(root),
                                  "--port", str(port), "--token-file", str(token)],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            wait_until_up(port, child)
            client = Client(port)
            repo = ids[len(ids) // 2]
            newest = f"v{args.versions}"
            variant = VARIANTS[0]
            api = f"/api/kernels/{repo}"
            versions = [f"v{v}" for v in range(1, args.versions + 1)]
            pairs = [
                ("index /", ["/"], "GET /api/kernels", ["/api/kernels"]),
                (f"kernel /{repo}", [f"/{repo}"], f"refs + {len(versions)} build/ trees",
                 [f"{api}/refs"] + [f"{api}/tree/{v}/build?recursive=true" for v in versions]),
                ("variant page", [f"/{repo}/tree/{newest}/{variant}"], "its tree + metadata.json",
                 [f"{api}/tree/{newest}/build/{variant}",
                  f"/kernels/{repo}/resolve/{newest}/build/{variant}/metadata.json"]),
                ("fit page", [f"/{repo}/fit?version={newest}&torch=2.14&cuda=13.0&arch=9.0"],
                 "its tree + metadata.json",
                 [f"{api}/tree/{newest}/build?recursive=true",
                  f"/kernels/{repo}/resolve/{newest}/build/{variant}/metadata.json"]),
            ]
            rows = []
            for page, page_paths, baseline, api_paths in pairs:
                p = timings(client, page_paths, args.rounds)
                a = timings(client, api_paths, args.rounds)
                rows.append({"page": page, "page_timing": p, "api": baseline, "api_timing": a,
                             "ratio_median": round(p["median_ms"] / a["median_ms"], 2),
                             "within_target": p["median_ms"] <= TARGET_MS})
        finally:
            child.terminate()
            child.wait(10)

    print(f"\n{'page':<28} {'cold':>9} {'median':>9} {'p95':>9} | "
          f"{'JSON API of the same data':<28} {'median':>9}  page/API")
    for r in rows:
        p, a = r["page_timing"], r["api_timing"]
        print(f"{r['page'][:28]:<28} {p['cold_ms']:>7.1f}ms {p['median_ms']:>7.1f}ms {p['p95_ms']:>7.1f}ms | "
              f"{r['api'][:28]:<28} {a['median_ms']:>7.1f}ms  {r['ratio_median']:.2f}x")
    ok = all(r["within_target"] for r in rows)
    print(f"\nevery warm page within {TARGET_MS:.0f} ms: {'yes' if ok else 'NO'}")
    result = {"repos": args.repos, "versions": args.versions, "variants_per_version": len(VARIANTS),
              "rounds": args.rounds, "target_ms": TARGET_MS, "hub_made_s": round(made, 1), "cpus": os.cpu_count(),
              "rows": rows, "all_within_target": ok}
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
