"""The kernel page and the variant page show each variant's published `kbuild check-layers` verdict
(layer-checks/<variant>.json, issue 50), over a real `kbuild hub serve` on 127.0.0.1 and a real git
store: the verdict and the first layer that differs; a malformed record, one of another build or one
too large is a line saying so, never a failed page; hostile text in a record stays text."""

from __future__ import annotations

import base64
import hashlib
import json
import re

import pytest

from hubserver import ServerThread
from kbuild.layer_check_record import MAX_BYTES
from kbuild_hub.gitstore import FileAdd, GitStore
from runtime_hubs import Kernel, runtime_env, torch_probes

__all__ = ["runtime_env", "torch_probes"]  # fixtures, used by name

K = ("kernel", "org/rotary")
GOOD, WRONG, BROKEN, OTHER, HUGE, NONE, HOSTILE = (f"torch213-cxx11-{c}-x86_64-linux" for c in
                                                   ("cpu", "cu130", "cu129", "cu128", "cu126", "rocm71", "xpu20251"))
ROWS = [{"layer": "model", "kernel_layer": "-", "dtype": "float32", "mode": "training", "part": "backward",
         "quantity": "grad of model.layers.0.self_attn.q_proj.weight", "rel": 0.85, "tolerance": 1e-3, "ok": False},
        {"layer": "rotary_pos_emb", "kernel_layer": "apply_rotary_transformers", "dtype": "float32",
         "mode": "training", "part": "backward", "quantity": "grad of q", "rel": 0.7723, "tolerance": 1e-4,
         "ok": False}]


def variant(name: str) -> tuple[list[FileAdd], bytes]:
    files = {"__init__.py": b"from ._ops import ops\n", "_ops.py": b"ops = None\n"}
    digest = {p: base64.b64encode(hashlib.sha256(d).digest()).decode() for p, d in files.items()}
    meta = json.dumps({"name": "rotary", "id": "_rotary_abc", "version": 1, "license": "Apache-2.0",
                       "python-depends": [], "kernel-depends": [], "backend": {"type": "cpu", "archs": []},
                       "digest": {"algorithm": "sha256", "files": digest},
                       "provenance": {"kernel-builder": {"name": "kbuild", "version": "0.1.0"}, "kernel": None},
                       "variant": name}).encode()
    return [FileAdd(f"build/{name}/{p}", d) for p, d in files.items()] + \
        [FileAdd(f"build/{name}/metadata.json", meta)], meta


def record(meta: bytes, **changes) -> bytes:
    doc = {"metadata_sha256": hashlib.sha256(meta).hexdigest(), "verdict": {"forward": True, "backward": False},
           "torch": "2.13.0", "transformers": "5.25.0", "device": "cpu", "gpu": None, "rows": ROWS}
    return json.dumps({**doc, **changes}).encode()


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    root = tmp_path_factory.mktemp("pages") / "hub"
    store = GitStore(root)
    store.create_repo(*K)
    main = store.commit(*K, "main", add=[FileAdd("README.md", b"# rotary\n")], message="card", parent=None)
    adds, metas = [], {}
    for name in (GOOD, WRONG, BROKEN, OTHER, HUGE, NONE, HOSTILE):
        files, metas[name] = variant(name)
        adds += files
    hostile = [{**ROWS[1], "layer": "<script>alert(1)</script>", "quantity": "<img src=x onerror=alert(2)>"}]
    adds += [FileAdd(f"layer-checks/{GOOD}.json", record(metas[GOOD], verdict={"forward": True, "backward": True},
                                                         rows=[{**r, "ok": True} for r in ROWS])),
             FileAdd(f"layer-checks/{WRONG}.json", record(metas[WRONG], device="cuda", gpu="NVIDIA H200",
                                                          torch="2.11.0+cu130")),
             FileAdd(f"layer-checks/{HOSTILE}.json", record(metas[HOSTILE], transformers="<b>5</b>", rows=hostile)),
             FileAdd(f"layer-checks/{BROKEN}.json", b'{"metadata_sha256": 12'),
             FileAdd(f"layer-checks/{OTHER}.json", record(metas[GOOD])),
             FileAdd(f"layer-checks/{HUGE}.json", record(metas[HUGE], notes=["x" * MAX_BYTES]))]
    store.commit(*K, "v1", add=adds, message="v1", parent=None, create_branch_from=main)
    server = ServerThread(root)
    yield server
    server.stop()


def get(server, path: str) -> tuple[int, str]:
    status, _, body = server.raw("GET", path)
    return status, body.decode()


def cell(html: str, name: str) -> str:
    """The grid cell of variant `name`: from its link to the end of its cell."""
    start = html.index(f'title="{name}"')
    return html[start:html.index("</td>", start)]


def test_the_kernel_page_shows_each_variants_verdict_and_first_difference(hub):
    status, html = get(hub, "/org/rotary")
    assert status == 200
    good, wrong = cell(html, GOOD), cell(html, WRONG)
    assert "layers checked against transformers 5.25.0 (torch 2.13.0, cpu): forward ✓ backward ✓" in good
    assert "differs" not in good and "rejected" not in good
    assert ("layers checked against transformers 5.25.0 (torch 2.11.0+cu130, NVIDIA H200): forward ✓ backward ✗"
            in wrong)
    # the first layer that differs, not the whole model's row before it
    assert "rotary_pos_emb (apply_rotary_transformers): grad of q differs, rel 0.77" in wrong
    assert "layer check" not in cell(html, NONE) and "layers checked" not in cell(html, NONE)


def test_a_record_that_cannot_be_shown_is_a_line_not_a_failed_page(hub):
    status, html = get(hub, "/org/rotary")
    assert status == 200
    assert "layer check unreadable (not JSON" in cell(html, BROKEN)
    assert "layer check of another build (not of this metadata.json)" in cell(html, OTHER)
    assert re.search(r"layer check unreadable \(\d+ bytes, over 4194304\)", cell(html, HUGE))


def test_hostile_text_in_a_record_stays_text(hub):
    for page in (f"/org/rotary/tree/v1/{HOSTILE}", "/org/rotary"):
        status, html = get(hub, page)
        assert status == 200 and "<script>alert" not in html and "<img src=x" not in html and "<b>5" not in html
        assert "&lt;script&gt;alert(1)&lt;/script&gt; (apply_rotary_transformers): &lt;img src=x" in html
        assert "transformers &lt;b&gt;5&lt;/b&gt;" in html


def test_the_variant_page_shows_the_verdict_and_links_the_record(hub):
    status, html = get(hub, f"/org/rotary/tree/v1/{WRONG}")
    assert status == 200
    assert "forward ✓ backward ✗" in html and "grad of q differs, rel 0.77" in html
    link = re.search(r'href="(/kernels/org/rotary/resolve/[0-9a-f]{40}/layer-checks/[^"]+\.json)"', html)
    assert link, html
    status, body = get(hub, link.group(1))
    assert status == 200 and json.loads(body)["verdict"] == {"forward": True, "backward": False}


def test_a_record_kbuild_publish_put_there_is_shown(tmp_path, runtime_env):
    """End to end: `kbuild publish` to a local hub, the page of `kbuild hub serve` on that hub."""
    kernel = Kernel(tmp_path / "tiny").write().build()
    meta = (kernel.variant("torch-cpu") / "metadata.json").read_bytes()
    (kernel.root / ".kbuild" / "torch-cpu").mkdir(parents=True)
    (kernel.root / ".kbuild" / "torch-cpu" / "layer-check.json").write_bytes(record(meta))
    kernel.publish(tmp_path / "hub")
    server = ServerThread(tmp_path / "hub")
    try:
        status, html = get(server, "/org/tiny")
    finally:
        server.stop()
    assert status == 200
    assert "(torch 2.13.0, cpu): forward ✓ backward ✗" in cell(html, "torch-cpu")
    assert "layers checked" not in cell(html, "torch-cuda")
