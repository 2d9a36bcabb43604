"""`kbuild hub serve`'s pages in a real browser: headless Chromium (Debian's `chromium`, installed by
ci/setup.sh) driven by playwright, against a hub that holds kernels built and published by kbuild
itself (the `kbuild init` scaffold, built with g++, benchmarked by `kbuild bench`, published with
`--with-bench`; and a second kernel in another org, for the filter). What a user sees: the index
and its filter, a kernel page whose grid shows the published variants, the benchmark plot drawn,
a variant's files, the fit form answering, and no console error, failed request or 4xx/5xx on the
way. Screenshots of each page go to the artifacts folder (CI uploads it)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from builder.commands.main import main
from hubserver import TOKEN, ServerThread
from tiny_kernel import write_kernel

REPO = Path(__file__).resolve().parents[2]
# CI uploads this folder (ci/workflow.yml); KBUILD_TEST_ARTIFACTS moves it
ARTIFACTS = Path(os.environ.get("KBUILD_TEST_ARTIFACTS") or REPO / ".artifacts")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def commit(folder: Path) -> None:
    subprocess.run(["git", "init", "-q"], cwd=folder, check=True)
    subprocess.run(["git", "add", "-A"], cwd=folder, check=True)
    subprocess.run(["git", "-c", "user.email=t@localhost", "-c", "user.name=t", "commit", "-qm", "k"], cwd=folder,
                   check=True)


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    """A served hub with me/bscale@v1 (a CPU build with its benchmark results) and org/tiny@v1."""
    root = tmp_path_factory.mktemp("browser")
    hub = root / "hub"
    kernel = root / "bscale"
    assert main(["init", "bscale", "--backends", "cpu", "--dir", str(kernel)]) == 0
    commit(kernel)
    assert main(["build", str(kernel)]) == 0
    assert main(["bench", str(kernel), "--repeats", "3", "--warmup", "1"]) == 0
    assert main(["publish", str(kernel), "--hub", str(hub), "--with-bench"]) == 0
    tiny = root / "tiny"
    write_kernel(tiny)
    (tiny / ".gitignore").write_text("build/\n.kbuild/\n")
    commit(tiny)
    assert main(["build", str(tiny)]) == 0
    assert main(["publish", str(tiny), "--hub", str(hub)]) == 0
    variants = sorted(p.name for p in (kernel / "build").iterdir() if p.is_dir())
    server = ServerThread(hub)
    yield server, variants, kernel
    server.stop()


@pytest.fixture(scope="module")
def private(hub):
    """The same hub served --private."""
    server = ServerThread(hub[2].parent / "hub", public_read=False)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def browser():
    if CHROMIUM is None:
        pytest.skip("no chromium on PATH (ci/setup.sh installs Debian's)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is in kbuild's test extra")
    with sync_api.sync_playwright() as p:
        # --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        yield browser
        browser.close()


class Visit:
    """A page in a fresh context that records every console error, uncaught exception, failed
    request and 4xx/5xx response while the test walks it."""

    def __init__(self, browser, **context):
        self.context = browser.new_context(viewport={"width": 1280, "height": 900}, **context)
        self.page = self.context.new_page()
        self.problems: list[str] = []
        self.page.on("console", lambda m: m.type == "error" and self.problems.append(f"console: {m.text}"))
        self.page.on("pageerror", lambda e: self.problems.append(f"page error: {e}"))
        self.page.on("requestfailed", lambda r: self.problems.append(f"failed: {r.url} {r.failure}"))
        self.page.on("response", lambda r: r.status >= 400 and self.problems.append(f"{r.status}: {r.url}"))

    def shot(self, name: str) -> None:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(ARTIFACTS / f"hub-{name}.png"), full_page=True)

    def close(self) -> None:
        self.context.close()


@pytest.fixture
def visit(browser):
    v = Visit(browser)
    yield v
    v.close()
    assert v.problems == [], "the browser saw errors:\n" + "\n".join(v.problems)


def names_listed(page) -> list[str]:
    return page.locator("#kernels td a").all_inner_texts()


def test_the_index_lists_the_published_kernels_and_the_filter_narrows_them(hub, visit):
    server, *_ = hub
    page = visit.page
    page.goto(server.url + "/")
    assert page.title() and sorted(names_listed(page)) == ["bscale", "tiny"]
    visit.shot("index")
    page.fill("#q", "bsc")
    page.click("form[role=search] button")
    page.wait_for_url("**/?q=bsc")
    assert names_listed(page) == ["bscale"]
    assert page.input_value("#q") == "bsc"  # the box keeps what was typed
    assert "1 of 2 kernel repo(s)" in page.inner_text("main")
    page.click("text=show all")
    assert sorted(names_listed(page)) == ["bscale", "tiny"]


def test_a_kernel_page_shows_its_variant_grid_use_it_and_the_benchmark_plot(hub, visit):
    server, variants, kernel = hub
    page = visit.page
    page.goto(server.url + "/")
    page.click("#kernels >> text=bscale")
    page.wait_for_url("**/me/bscale")
    use = page.inner_text("#use-it")
    # me is not trusted on this hub: the line says so; the scaffold has no layers nor attention: no transformers
    assert 'get_kernel("me/bscale", version=1, trust_remote_code=True)' in use, use
    assert "kbuild hub serve --trusted-org me" in use and "KernelConfig" not in use and "attn_implementation" not in use
    grid = page.locator("#v1 table.grid")
    shown = sorted(grid.locator("td.cell a").all_inner_texts())
    assert shown == variants, (shown, variants)  # every variant the build staged, one cell link each
    assert page.locator("#v1 table.bench td").filter(has_text="scale").count() >= 1
    plot = page.locator("#v1 img")
    plot.scroll_into_view_if_needed()
    # drawn, not a broken image: the SVG came back as an image the browser decoded
    assert plot.evaluate("img => img.complete && img.naturalWidth > 0")
    visit.shot("kernel")

    # a cell leads to the variant's files, each with its digest as `sha256sum` prints it
    grid.locator("td.cell a").first.click()
    page.wait_for_url(f"**/me/bscale/tree/v1/{variants[0]}")
    rows = page.locator("#files tr").all()[1:]
    shown = {r.locator("td").nth(0).inner_text(): r.locator("td").nth(2).inner_text() for r in rows}
    built = kernel / "build" / variants[0]
    digests = json.loads((built / "metadata.json").read_text())["digest"]["files"]
    listed = subprocess.run(["sha256sum", *sorted(digests)], cwd=built, capture_output=True, text=True, check=True)
    sums = {path: digest for digest, path in (line.split("  ", 1) for line in listed.stdout.splitlines())}
    assert {path: shown[path] for path in digests} == sums  # each file with the digest it was built with
    visit.shot("variant")


def test_the_fit_form_answers_which_variant_loads(hub, visit):
    server, variants, _ = hub
    page = visit.page
    page.goto(server.url + "/me/bscale")
    form = page.locator("form#fit")
    form.locator("input[name=cuda]").fill("")  # a CPU machine
    form.locator("input[name=torch]").fill("2.14")
    form.locator("button").click()
    page.wait_for_url("**/me/bscale/fit?**")
    (cpu,) = [v for v in variants if "-cpu-" in v]
    assert f"It loads {cpu}" in page.inner_text("main")
    visit.shot("fit")
    # a torch older than any variant's floor: none loads, and the page says why for each
    page.goto(server.url + "/me/bscale")
    form.locator("input[name=cuda]").fill("")
    form.locator("input[name=torch]").fill("2.8")
    form.locator("button").click()
    page.wait_for_url("**torch=2.8**")
    text = page.inner_text("main")
    assert "No variant of v1 loads there" in text and cpu in text


def test_a_private_hub_asks_the_browser_for_the_token_and_then_shows_everything(private, browser):
    # (the 401 page and its challenge: test_hub_pages.py; headless Chromium cannot show a prompt)
    # the browser answers the Basic challenge with the token as the password, for the page and
    # for what it links (the plot is read from the API's resolve/)
    visit = Visit(browser, http_credentials={"username": "me", "password": TOKEN})
    try:
        page = visit.page
        page.goto(private.url + "/")
        assert sorted(names_listed(page)) == ["bscale", "tiny"]
        page.click("#kernels >> text=bscale")
        plot = page.locator("#v1 img")
        plot.scroll_into_view_if_needed()
        assert plot.evaluate("img => img.complete && img.naturalWidth > 0")
    finally:
        visit.close()
    assert visit.problems == [], "the browser saw errors:\n" + "\n".join(visit.problems)
