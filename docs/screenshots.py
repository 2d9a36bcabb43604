"""Make the README's pictures of `kbuild hub serve`'s pages (docs/images/hub-*.png).

    .venv/bin/kbuild build kernels/activation && .venv/bin/kbuild bench kernels/activation   # each kernel
    .venv/bin/python docs/screenshots.py [--kernels activation rmsnorm rotary] [--show activation]

Publishes the first-party kernels as they are built in kernels/*/build, with their latest
`kbuild bench` results where there are some (`--with-bench`), to a fresh local hub; serves it
with the real `kbuild hub serve` and has headless Chromium (playwright, the system's chromium)
save the index and the newest version of one kernel's page (its grid and benchmarks). Needs what ci/setup.sh installs.
"""

from __future__ import annotations

import argparse
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
KBUILD = [sys.executable, "-m", "builder.commands.main"]


def publish(kernel: Path, hub: Path) -> None:
    with_bench = ["--with-bench"] if (kernel / ".kbuild" / "bench" / "results.json").is_file() else []
    done = subprocess.run([*KBUILD, "publish", str(kernel), "--hub", str(hub), *with_bench],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"kbuild publish {kernel.name} failed:\n{done.stdout}{done.stderr}")


def serve(hub: Path, token: Path) -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    child = subprocess.Popen([*KBUILD, "hub", "serve", "--root", str(hub), "--port", str(port),
                              "--token-file", str(token)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if child.poll() is not None:
            raise SystemExit(f"kbuild hub serve exited: {child.stderr.read().decode()[-2000:]}")
        try:
            urllib.request.urlopen(url + "/api/kernels", timeout=2).read()
            return child, url
        except OSError:
            time.sleep(0.1)
    raise SystemExit("kbuild hub serve did not start in 30 s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", nargs="+", default=["activation", "rmsnorm", "rotary"])
    parser.add_argument("--show", default="activation", help="the kernel whose page is shot")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "images")
    args = parser.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("no chromium on PATH (ci/setup.sh installs Debian's)")
    from playwright.sync_api import sync_playwright

    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kbuild-shots-") as tmp:
        hub = Path(tmp) / "hub"
        for name in args.kernels:
            kernel = REPO / "kernels" / name
            if not (kernel / "build").is_dir():
                raise SystemExit(f"{kernel}: nothing built; run kbuild build {kernel} first")
            publish(kernel, hub)
        token = Path(tmp) / "token"
        token.write_text("kb_screenshots\n")
        token.chmod(0o600)
        child, url = serve(hub, token)
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox"])
                page = browser.new_page(viewport={"width": 1100, "height": 700})
                page.goto(url + "/")
                page.locator("main").screenshot(path=str(args.out / "hub-index.png"))
                page.goto(f"{url}/kbuild/{args.show}")
                page.locator("section.version").first.screenshot(path=str(args.out / "hub-kernel-versions.png"))
                browser.close()
        finally:
            child.terminate()
            child.wait(10)
    for name in ("hub-index.png", "hub-kernel-versions.png"):
        print(args.out / name)


if __name__ == "__main__":
    main()
