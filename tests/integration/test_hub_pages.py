"""`kbuild hub serve`'s pages over a real server on 127.0.0.1 and a real git store: the index and
its filter, a kernel's card, versions and variant grid, a variant's files with digests, which
variant loads on a described machine (the loader's own verdicts), the benchmarks panel, a
private hub asking for the token, and hostile cards, file names and repo ids that stay text."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from html.parser import HTMLParser

import pytest

from hubserver import TOKEN, ServerThread
from kbuild_hub.gitstore import FileAdd, GitStore

K = ("kernel", "org/flash")
HOSTILE_CARD = """---
license: apache-2.0
---
# flash

<script>alert("card")</script>

[click me](javascript:alert(1)) and [fine](https://example.org/docs) <img src=x onerror=alert(2)>
"""


def metadata(archs: list[str], digest: dict[str, str], depends: tuple[str, ...]) -> bytes:
    return json.dumps({"name": "flash", "id": "_flash_abc1234", "version": 1, "license": "Apache-2.0",
                       "python-depends": list(depends), "kernel-depends": [],
                       "backend": {"type": "cuda", "archs": archs},
                       "digest": {"algorithm": "sha256", "files": digest},
                       "abi": {"glibc": "2.34", "glibcxx": "3.4.29", "manylinux": "manylinux_2_34_x86_64"},
                       "provenance": {"kernel-builder": {"name": "kbuild", "version": "0.1.0"},
                                      "kernel": {"commit": "c0ffee" * 6 + "abcd", "dirty": False}}}).encode()


PLAIN = {"__init__.py": b"from ._ops import ops\n", "_ops.py": b"ops = None\n"}
# what transformers looks for: layers (KernelConfig's "repo:Layer") and flash_attn_varlen_func (attn_implementation)
WITH_LAYERS = {"__init__.py": b"from ._ops import ops\nfrom .attention import flash_attn_varlen_func\n",
               "_ops.py": b"ops = None\n", "attention.py": b"def flash_attn_varlen_func(*args): ...\n",
               "layers.py": b"class RMSNorm: ...\n"}


def variant_files(name: str, archs: list[str], files: dict[str, bytes] = PLAIN,
                  depends: tuple[str, ...] = ("einops-not-installed-here",)) -> list[FileAdd]:
    # metadata.json's digests as kbuild writes them: base64 of each file's sha256
    digest = {path: base64.b64encode(hashlib.sha256(data).digest()).decode() for path, data in files.items()}
    return [FileAdd(f"build/{name}/{p}", d) for p, d in files.items()] + \
        [FileAdd(f"build/{name}/metadata.json", metadata(archs, digest, depends))]


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """The hub's git store: org/flash with a card, v1 and v2 (v2's variant has layers and attention), other/relu."""
    root = tmp_path_factory.mktemp("pages") / "hub"
    store = GitStore(root)
    store.create_repo(*K)
    main = store.commit(*K, "main", add=[FileAdd("README.md", HOSTILE_CARD.encode())], message="card", parent=None)
    v1 = variant_files("torch-stable-abi210-cu130-x86_64-linux", ["9.0"]) + \
        variant_files("torch213-cxx11-cpu-x86_64-linux", [], depends=())  # kbuild's loader takes it: test_the_use_it_lines_work_as_copied
    store.commit(*K, "v1", add=v1, message="v1", parent=None, create_branch_from=main)
    results = {"workloads": [{"kernel": "flash", "variant": "torch-stable-abi210-cu130-x86_64-linux",
                              "script": "benchmark.py", "class": "FlashBench", "name": "causal", "device": "cuda",
                              "timing": {"min_ms": 0.5, "median_ms": 0.6, "max_ms": 0.9},
                              "reference": {"min_ms": 1.1, "median_ms": 1.2, "max_ms": 1.5},
                              "verified": True, "error": "", "speedup": 2.0}], "machines": {}, "skipped": []}
    v2 = variant_files("torch-stable-abi210-cu130-x86_64-linux", ["8.0", "9.0", "10.0"], WITH_LAYERS) + \
        [FileAdd("benchmarks/results/results.json", json.dumps(results).encode()),
         FileAdd("benchmarks/results/results.svg", b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(4)</script></svg>'),
         FileAdd("benchmarks/peers.svg", b'<svg xmlns="http://www.w3.org/2000/svg"/>'),
         FileAdd('benchmarks/plots/a b"><script>alert(5)</script>.svg', b'<svg xmlns="http://www.w3.org/2000/svg"/>'),
         FileAdd("benchmarks/benchmark.py", b""),
         FileAdd("build/<b>onerror=alert(3)</b>/x.py", b"")]
    store.commit(*K, "v2", add=v2, message="v2", parent=None, create_branch_from=main)
    store.create_repo("kernel", "other/relu")
    store.commit("kernel", "other/relu", "v1", add=variant_files("torch213-cxx11-cpu-x86_64-linux", [], depends=()),
                 message="v1", parent=None, create_branch_from="main")
    return root


@pytest.fixture(scope="module")
def hub(root):
    server = ServerThread(root)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def trusting(root):
    """The same store, served with --trusted-org org."""
    server = ServerThread(root, trusted=("org",))
    yield server
    server.stop()


def get(server, path: str, headers: dict | None = None) -> tuple[int, str, dict]:
    status, head, body = server.raw("GET", path, headers=headers)
    return status, body.decode(), head


class Tags(HTMLParser):
    """Every tag and attribute the browser would see, and the page's text."""

    def __init__(self, html: str):
        super().__init__()
        self.tags, self.attrs, self.text = [], [], []
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs.extend(attrs)

    def handle_data(self, data):
        self.text.append(data)


def test_the_index_lists_kernels_and_filters_them(hub):
    status, html, head = get(hub, "/")
    assert status == 200 and head["content-type"].startswith("text/html")
    assert "script-src" not in head["content-security-policy"] and "default-src 'none'" in head["content-security-policy"]
    assert 'href="/org/flash"' in html and 'href="/other/relu"' in html and "2 of 2 kernel repo(s)" in html
    row = re.search(r'<a href="/org/flash">flash</a></td>\s*<td>(\w+)</td>\s*<td>([^<]+)</td>\s*<td class="num">(\d+)', html)
    assert row and row.group(1) == "v2" and row.group(3) == "2", html  # newest version, its variant count
    status, html, _ = get(hub, "/?q=rel")
    assert status == 200 and 'href="/other/relu"' in html and 'href="/org/flash"' not in html and "1 of 2" in html


def test_a_kernel_page_shows_versions_grid_use_it_and_benchmarks(hub):
    status, html, _ = get(hub, "/org/flash")
    assert status == 200
    assert html.index('id="v2"') < html.index('id="v1"')  # newest first
    use = use_it(html)
    # org is not trusted on this hub: the lines say so, and work as copied
    assert 'get_kernel("org/flash", version=2, trust_remote_code=True)' in use, use
    assert "kbuild hub serve --trusted-org org" in use and "KBUILD_TRUSTED_ORGS" not in use
    # transformers' KernelConfig: "repo:LayerClass" with the version beside it, never repo@vN; v2 has
    # layers and flash_attn_varlen_func, so both lines, with transformers' own trust switch
    assert ('config = KernelConfig({"RMSNorm": ("org/flash:LAYER", {"version": 2})})\n'
            "model = AutoModelForCausalLM.from_pretrained(MODEL, kernel_config=config, allow_all_kernels=True)") in use
    assert 'attn_implementation="org/flash@v2", allow_all_kernels=True)' in use
    assert f"HF_ENDPOINT={hub.url}" in use
    # the grid: stable ABI row, CUDA 13.0 column; v1 also a torch 2.13 CPU cell
    assert "stable ABI (torch &gt;= 2.10)" in html and "CUDA 13.0" in html and "torch 2.13" in html and ">CPU<" in html
    assert "archs 8.0 9.0 10.0" in html and "manylinux_2_34_x86_64 (glibc 2.34, GLIBCXX 3.4.29)" in html
    assert 'href="/org/flash/tree/v2/torch-stable-abi210-cu130-x86_64-linux"' in html
    assert "FlashBench.causal" in html and "2.00x" in html and "results.svg" in html
    # the plot is served as an image a browser shows, and under a policy that runs nothing of it
    src = re.search(r'<img src="([^"]+results\.svg)"', html).group(1)
    status, _, head = get(hub, src)
    assert status == 200 and head["content-type"] == "image/svg+xml"
    assert "sandbox" in head["content-security-policy"] and "script-src" not in head["content-security-policy"]


def use_it(html: str) -> str:
    """The "Use it" block's text, as a browser shows it."""
    block = re.search(r'<pre id="use-it">(.*?)</pre>', html, re.S)
    assert block, html
    return "".join(Tags(block.group(1)).text)


def test_the_use_it_block_follows_trust_layers_and_attention(hub, trusting):
    # a kernel with neither layers nor an attention entry: get_kernel alone, nothing of transformers
    _, html, _ = get(hub, "/other/relu")
    use = use_it(html)
    assert 'get_kernel("other/relu", version=1, trust_remote_code=True)' in use, use
    assert "transformers" not in use and "KernelConfig" not in use and "attn_implementation" not in use
    # served with --trusted-org org: Hugging Face's loader trusts it as the hub says, kbuild's by its setting
    _, html, _ = get(trusting, "/org/flash")
    use = use_it(html)
    assert 'get_kernel("org/flash", version=2)\n' in use and "trust_remote_code" not in use, use
    assert "allow_all_kernels" not in use and 'attn_implementation="org/flash@v2")' in use
    assert f"KBUILD_TRUSTED_ORGS=org@{trusting.url}" in use
    _, html, _ = get(trusting, "/other/relu")  # another org on the same hub is still not trusted
    assert 'get_kernel("other/relu", version=1, trust_remote_code=True)' in use_it(html)


def test_the_use_it_lines_work_as_copied(hub, trusting, tmp_path, monkeypatch):
    """kbuild's loader over HTTP, as the block says for each hub: an untrusted org with
    trust_remote_code=True, a trusted one with the KBUILD_TRUSTED_ORGS line and nothing else."""
    from kbuild import get_kernel
    from kbuild.errors import UntrustedKernel
    from kbuild.variants import SystemInfo

    cpu = SystemInfo((2, 13), "cpu", None, "x86_64", "linux")  # what the fixture's torch213 CPU variants fit
    monkeypatch.setenv("KBUILD_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("KBUILD_TRUSTED_ORGS", raising=False)
    with pytest.raises(UntrustedKernel):  # what the block's first lines met (issue 45)
        get_kernel("other/relu", version=1, hub=hub.url, system=cpu)
    assert get_kernel("other/relu", version=1, hub=hub.url, system=cpu, trust_remote_code=True).ops is None
    monkeypatch.setenv("KBUILD_TRUSTED_ORGS", f"org@{trusting.url}")
    assert get_kernel("org/flash", version=1, hub=trusting.url, system=cpu).ops is None


def test_a_kernel_page_shows_the_plots_its_benchmarks_folder_carries(hub):
    _, html, _ = get(hub, "/org/flash")
    v2, v1 = html[html.index('id="v2"'):html.index('id="v1"')], html[html.index('id="v1"'):]
    plots = re.findall(r'<img src="(/kernels/org/flash/resolve/[0-9a-f]{40}/benchmarks/[^"]+)"', v2)
    # results.svg once (beside its table), then every other .svg of benchmarks/, nothing else of it
    assert [p.split("/", 6)[6] for p in plots] == [
        "benchmarks/results/results.svg", "benchmarks/peers.svg",
        "benchmarks/plots/a%20b%22%3E%3Cscript%3Ealert%285%29%3C/script%3E.svg"], plots
    for src in plots[1:]:
        status, body, head = get(hub, src)
        assert status == 200 and head["content-type"] == "image/svg+xml" and body.startswith("<svg"), src
    assert "Plots" not in v1 and "<img" not in v1  # v1's branch has no benchmarks/


def test_untrusted_text_never_becomes_markup(hub):
    _, html, _ = get(hub, "/org/flash")
    parsed = Tags(html)
    assert "script" not in parsed.tags
    assert not [v for k, v in parsed.attrs if k.startswith("on")], "no event handler attribute"
    assert not [v for k, v in parsed.attrs if k == "href" and v and v.strip().lower().startswith("javascript:")]
    assert ("href", "https://example.org/docs") in parsed.attrs  # a plain link stays a link
    # a hostile variant folder name (git splits `</b>` at its slash: the variant is `<b>onerror=alert(3)<`)
    assert "<b>onerror" not in html and "&lt;b&gt;onerror=alert(3)&lt;" in html
    assert "license: apache-2.0" not in html  # the card's front matter is metadata, not prose
    status, html, _ = get(hub, "/org/%3Cscript%3E")
    assert status == 400 and "<script>" not in html and "&lt;script&gt;" in html  # an invalid repo id, named as text


def test_a_variant_page_lists_files_with_digests_and_provenance(hub):
    status, html, _ = get(hub, "/org/flash/tree/v1/torch-stable-abi210-cu130-x86_64-linux")
    assert status == 200
    # each digest as `sha256sum` prints it: the hex of the file's sha256, not metadata.json's base64
    for path, data in PLAIN.items():
        assert f"<code>{hashlib.sha256(data).hexdigest()}</code>" in html, path
        assert base64.b64encode(hashlib.sha256(data).digest()).decode() not in html
    # a digest that is no base64 sha256 (an older or foreign metadata.json) is shown as recorded, saying so
    from kbuild_hub.pages.model import _hex
    assert _hex("sha-of-x.py") == "not a sha256: sha-of-x.py" and _hex(base64.b64encode(b"x" * 16).decode()).startswith("not")
    assert "c0ffee" * 6 + "abcd" in html and "kbuild 0.1.0" in html
    assert '/kernels/org/flash/resolve/' in html  # each file links its download
    status, html, _ = get(hub, "/org/flash/tree/v9/torch-stable-abi210-cu130-x86_64-linux")
    assert status == 404 and "has no version" in html and "(its versions: v2, v1)" in html


def test_fit_answers_with_the_loaders_own_verdicts(hub):
    status, html, _ = get(hub, "/org/flash/fit?version=v1&torch=2.13&cuda=13.0&arch=9.0")
    assert status == 200 and "It loads torch-stable-abi210-cu130-x86_64-linux" in html
    assert "einops-not-installed-here" not in html  # python-depends are the client's, not the server's
    status, html, _ = get(hub, "/org/flash/fit?version=v1&torch=2.13&cuda=13.0&arch=8.6")
    assert status == 200 and "No variant of v1 loads there" in html
    assert "none of which runs on this GPU" in html  # the GPU-arch verdict from kbuild.fit
    status, html, _ = get(hub, "/org/flash/fit?version=v1&torch=2.13&cuda=")
    assert status == 200 and "It loads torch213-cxx11-cpu-x86_64-linux" in html
    status, html, _ = get(hub, "/org/flash/fit?version=v1&torch=two")
    assert status == 400 and "torch: expected MAJOR.MINOR such as 2.13, got &#39;two&#39;" in html


def test_a_private_hub_asks_for_the_token_on_pages_too(tmp_path):
    root = tmp_path / "hub"
    GitStore(root).create_repo(*K)
    server = ServerThread(root, public_read=False)
    try:
        for path in ("/", "/org/flash", "/org/flash/fit?torch=2.14"):
            status, html, head = get(server, path)
            # a page, and a challenge the browser answers by asking for the token (it cannot send a bearer)
            assert status == 401 and head["content-type"].startswith("text/html"), (path, status)
            assert head["www-authenticate"] == 'Basic realm="kbuild hub", charset="UTF-8"'
            assert "This hub is private" in html and "token of this hub as the password" in html
        status, html, _ = get(server, "/", headers={"Authorization": f"Bearer {TOKEN}"})
        assert status == 200 and 'href="/org/flash"' in html
        basic = "Basic " + base64.b64encode(f"anyone:{TOKEN}".encode()).decode()
        status, html, _ = get(server, "/", headers={"Authorization": basic})
        assert status == 200 and 'href="/org/flash"' in html
        # what the page links (its files, the plot) reads with the same credentials
        status, _, _ = server.raw("GET", "/api/kernels", headers={"Authorization": basic})
        assert status == 200
        wrong = "Basic " + base64.b64encode(b"anyone:not-the-token").decode()
        status, _, head = get(server, "/", headers={"Authorization": wrong})
        assert status == 401 and head["www-authenticate"].startswith("Basic ")  # asked again
        status, head, _ = server.raw("GET", "/api/kernels")  # the API keeps huggingface_hub's answer
        assert status == 401 and head["www-authenticate"].startswith("Bearer ")
    finally:
        server.stop()


def test_the_index_rows_follow_every_branch_change_through_their_cache(tmp_path):
    """The index keeps each row while the repo's refs stamp (refs folders and packed-refs) stays
    the same, and a stamp younger than git's racy window is never trusted: every branch made,
    moved, deleted or packed shows on the next visit, whether it lands now or after a while."""
    import os
    import subprocess
    import time

    from kbuild_hub.pages.model import Catalog

    store = GitStore(tmp_path / "hub")
    store.create_repo(*K)
    repo = store.repo_dir(*K)
    catalog = Catalog(store)

    def row() -> tuple:
        (s,) = catalog.summaries()
        return s.newest, s.variants

    def settle() -> None:  # as if the last change were minutes old: the stamp becomes trusted
        past = time.time() - 600
        for name in ("refs/heads", "refs/tags", "packed-refs"):
            if (repo / name).exists():
                os.utime(repo / name, (past, past))

    def publish(branch: str, variants: int) -> None:
        files = [f for n in range(variants) for f in variant_files(f"torch-stable-abi210-cu13{n}-x86_64-linux", ["9.0"])]
        head = store.branches(*K).get(branch)
        store.commit(*K, branch, add=files, message=branch, parent=head,
                     create_branch_from=None if head else store.resolve(*K, "main"))

    assert row() == (None, 0)
    publish("v1", 1)
    assert row() == ("v1", 1)  # changed just now: read, not taken from a cache
    settle()
    assert row() == row() == ("v1", 1)  # trusted and kept
    publish("v2", 2)
    assert row() == ("v2", 2)
    settle()
    assert row() == ("v2", 2)
    store.delete_branch(*K, "v2")
    assert row() == ("v1", 1)
    settle()
    subprocess.run(["git", "--git-dir", str(repo), "pack-refs", "--all"], check=True)
    settle()
    assert row() == ("v1", 1)
    publish("v1", 3)  # the packed v1 moves: a loose ref again
    assert row() == ("v1", 3)
    settle()
    assert row() == ("v1", 3)
    # the racy rule itself: a stamp is trusted only once its newest part is RACY_S old
    from kbuild_hub.refs_reader import RACY_S, refs_stamp
    newest = max((repo / n).stat().st_mtime for n in ("refs/heads", "refs/tags", "packed-refs") if (repo / n).exists())
    assert refs_stamp(repo, now=newest + RACY_S / 2) is None
    assert refs_stamp(repo, now=newest + RACY_S * 2) == store.refs_stamp(*K)
