"""`kbuild toolchain check-index` on a recorded answer (tests/data/pypi/torch-simple.json: PyPI's
PEP 691 page for torch and its wheels' METADATA as read from PyPI): which releases the table lacks,
their CUDA from each wheel's requirements, the rows to add, and --write's overlay. No network: the
wheels' range requests are answered from zips carrying the recorded METADATA."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pytest

from builder.config.cascade import Setting
from builder.plan.matrix import full_matrix
from builder.toolchains.index_check import lacking, rows_text, torch_cuda, write_overlay
from builder.toolchains.package_index import JSON_SIMPLE, PackageIndex
from builder.toolchains.versions import read_table
from kbuild_common.errors import UsageError

RECORDED = json.loads((Path(__file__).resolve().parents[1] / "data" / "pypi" / "torch-simple.json").read_text())
PAGE = "https://pypi.org/simple/torch/"

# kbuild's table as it was before torch 2.15 came out
TABLE = """\
[default]
torch = ["2.13", "2.14"]
cuda = ["13.0", "13.2"]
{torch}
[cuda."13.0"]
toolkit = "cuda-toolkit[nvcc,cccl]==13.0.*"
archs = ["7.5", "9.0", "12.0"]
{cuda_132}"""
ROWS = "".join(f'\n[torch."{s}"]\nversion = "{v}"\ncuda = ["13.0"]\n' for s, v in
               (("2.11", "2.11.0"), ("2.12", "2.12.0"), ("2.13", "2.13.0"), ("2.14", "2.14.1")))
CUDA_132 = '\n[cuda."13.2"]\ntoolkit = "cuda-toolkit[nvcc,cccl]==13.2.*"\narchs = ["7.5", "9.0", "12.0"]\n'


class Recorded:
    """The index as recorded: its project page, and each wheel's bytes as a zip holding its recorded
    METADATA (the listing's sizes are those zips'); counts what a check asked for."""

    def __init__(self):
        self.wheels, self.requests = {}, []
        files = []
        for entry in RECORDED["files"]:
            entry = dict(entry)
            text = RECORDED["metadata"].get(entry["filename"])
            if text is not None:
                buffer = io.BytesIO()
                with zipfile.ZipFile(buffer, "w") as z:
                    z.writestr("torch/__init__.py", "")
                    z.writestr(f"torch-{entry['filename'].split('-')[1]}.dist-info/METADATA", text)
                self.wheels[entry["url"]] = buffer.getvalue()
                entry["size"] = len(buffer.getvalue())
            files.append(entry)
        self.page = json.dumps({**{k: RECORDED[k] for k in ("meta", "name", "versions")}, "files": files}).encode()

    def __call__(self, url, headers):
        self.requests.append((url, headers))
        if url == PAGE:
            return 200, {"content-type": JSON_SIMPLE}, self.page
        body = self.wheels.get(url)
        if body is None or "Range" not in headers:  # never a whole wheel
            return 404, {}, b""
        start, end = (int(x) for x in headers["Range"].removeprefix("bytes=").split("-"))
        return 206, {"content-range": f"bytes {start}-{end}/{len(body)}"}, body[start:end + 1]


def table(tmp_path, cuda_132=CUDA_132):
    path = tmp_path / "versions.toml"
    path.write_text(TABLE.format(torch=ROWS, cuda_132=cuda_132))
    return read_table(path)


def test_the_table_lacks_torch_2_15_with_the_cuda_its_wheel_requires(tmp_path):
    index = Recorded()
    found = lacking(PackageIndex("https://pypi.org/simple", index), table(tmp_path), python=(3, 11))
    assert [(f.series, f.release, f.cuda, f.table_release) for f in found] == [
        ("2.12", "2.12.1", ("13.0",), "2.12.0"),  # a newer patch of a release the table has
        ("2.15", "2.15.0", ("13.2",), None),
    ]
    assert found[1].wheel == "torch-2.15.0-cp311-cp311-manylinux_2_28_x86_64.whl" and found[1].new_cuda == ()
    assert found[1].describe() == ("torch 2.15.0: its wheel requires CUDA 13.2 "
                                   "(torch-2.15.0-cp311-cp311-manylinux_2_28_x86_64.whl)")
    # one page, then only range requests of the two wheels it read (no wheel downloaded whole)
    assert index.requests[0][0] == PAGE
    assert {url.rsplit("/", 1)[1] for url, _ in index.requests[1:]} == {
        "torch-2.12.1-cp311-cp311-manylinux_2_28_x86_64.whl", "torch-2.15.0-cp311-cp311-manylinux_2_28_x86_64.whl"}
    assert all("Range" in headers for _, headers in index.requests[1:])


def test_the_rows_to_add_plan_the_new_release(tmp_path, monkeypatch):
    known = table(tmp_path, cuda_132="")  # a table without CUDA 13.2: its row comes too
    found = lacking(PackageIndex("https://pypi.org/simple", Recorded()), known, python=(3, 11))
    text = rows_text(found, known)
    assert '[torch."2.15"]\nversion = "2.15.0"\ncuda = ["13.2"]  # torch-2.15.0-cp311-' in text
    assert ('[cuda."13.2"]\ntoolkit = "cuda-toolkit[nvcc,cccl]==13.2.*"\narchs = ["7.5", "9.0", "12.0"]  '
            "# CUDA 13.0's: check `nvcc --list-gpu-arch` of CUDA 13.2") in text
    overlay = tmp_path / "overlay.toml"
    overlay.write_text("# mine\n[default]\ntorch = [\"2.14\", \"2.15\"]\n")
    write_overlay(overlay, found, known, "KBUILD_VERSIONS")
    written = overlay.read_text()
    assert written.startswith("# mine\n[default]\ntorch = [\"2.14\", \"2.15\"]\n") and '[torch."2.15"]' in written
    merged = read_table(overlay=Setting(overlay, "KBUILD_VERSIONS"))
    assert merged.data["torch"]["2.15"] == {"version": "2.15.0", "cuda": ["13.2"]}
    assert merged.origin("torch", "2.15").startswith(f"{overlay}:") and list(overlay.parent.glob(".*.tmp")) == []
    monkeypatch.setenv("KBUILD_VERSIONS", str(overlay))  # the shipped table with the overlay: 2.12.1 and 2.15.0
    assert {r.series: r.version for r in full_matrix().torch}[(2, 12)] == "2.12.1"


def test_write_leaves_an_unreadable_overlay_as_it_was(tmp_path):
    known = table(tmp_path)
    found = lacking(PackageIndex("https://pypi.org/simple", Recorded()), known, python=(3, 11))
    overlay = tmp_path / "overlay.toml"
    overlay.write_text("[torch.\"2.15\"\nbroken")
    with pytest.raises(UsageError, match=r"^KBUILD_VERSIONS: .*overlay.toml: cannot read it as TOML"):
        write_overlay(overlay, found, known, "KBUILD_VERSIONS")
    assert overlay.read_text() == "[torch.\"2.15\"\nbroken"


def test_pep_658_metadata_is_used_when_the_index_has_it(tmp_path):
    index = Recorded()
    page = json.loads(index.page)
    for entry in page["files"]:
        entry["core-metadata"] = True
    index.page = json.dumps(page).encode()
    texts = {url + ".metadata": RECORDED["metadata"][url.rsplit("/", 1)[1]] for url in index.wheels}
    served = index.__call__

    def transport(url, headers):
        if url in texts:
            return 200, {}, texts[url].encode()
        return served(url, headers)

    found = lacking(PackageIndex("https://pypi.org/simple/", transport), table(tmp_path), python=(3, 11))
    assert [f.cuda for f in found] == [("13.0",), ("13.2",)]
    assert all("Range" not in headers for _, headers in index.requests[1:]) and len(index.requests) == 1


def test_an_index_without_pep_691_is_one_line():
    def html(url, headers):
        return 200, {"content-type": "text/html"}, b"<html></html>"

    with pytest.raises(UsageError, match=r"^https://example.test/simple/torch/: the index did not answer in PEP 691 "
                                         r"JSON \(content-type 'text/html'\); name one that does with --index$"):
        PackageIndex("https://example.test/simple", html).files("torch")


def test_torch_cuda_from_requirements():
    recorded = RECORDED["metadata"]["torch-2.15.0-cp311-cp311-manylinux_2_28_x86_64.whl"]
    from builder.toolchains.package_index import requires_dist

    assert torch_cuda(requires_dist(recorded)) == ("13.2",)
    assert torch_cuda(['nvidia-cuda-runtime-cu12==12.8.90; platform_system == "Linux"', "filelock"]) == ("12.8",)
    assert torch_cuda(["filelock", "sympy>=1.13.3"]) == ()  # a CPU build
