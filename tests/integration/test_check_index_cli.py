"""`kbuild toolchain check-index` end to end against a real HTTP index on 127.0.0.1 that serves the
recorded PyPI answer (tests/data/pypi/torch-simple.json) in PEP 691 JSON and its wheels by byte
ranges (zips holding the recorded METADATA): what the command prints, its exit code, and --write's
overlay, which the next run and the matrix read."""

from __future__ import annotations

import io
import json
import threading
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from builder.commands.main import main
from builder.plan.matrix import full_matrix

RECORDED = json.loads((Path(__file__).resolve().parents[1] / "data" / "pypi" / "torch-simple.json").read_text())


@pytest.fixture
def index():
    wheels, files = {}, []
    for entry in RECORDED["files"]:
        entry = dict(entry, url=f"/files/{entry['filename']}")
        text = RECORDED["metadata"].get(entry["filename"])
        if text is not None:
            buffer = io.BytesIO()
            with zipfile.ZipFile(buffer, "w") as z:
                z.writestr(f"torch-{entry['filename'].split('-')[1]}.dist-info/METADATA", text)
            wheels[entry["url"]] = buffer.getvalue()
            entry["size"] = len(buffer.getvalue())
        files.append(entry)
    page = json.dumps({"meta": RECORDED["meta"], "name": "torch", "versions": RECORDED["versions"],
                       "files": files}).encode()
    asked = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            asked.append((self.path, self.headers.get("Range")))
            if self.path == "/simple/torch/":
                self._answer(200, page, {"Content-Type": "application/vnd.pypi.simple.v1+json"})
            elif self.path in wheels and self.headers.get("Range"):
                body = wheels[self.path]
                start, end = (int(x) for x in self.headers["Range"].removeprefix("bytes=").split("-"))
                end = min(end, len(body) - 1)
                self._answer(206, body[start:end + 1], {"Content-Range": f"bytes {start}-{end}/{len(body)}"})
            else:
                self._answer(404, b"", {})

        def _answer(self, status, body, headers):
            self.send_response(status)
            for k, v in {**headers, "Content-Length": str(len(body))}.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/simple", asked
    server.shutdown()
    server.server_close()


def test_check_index_prints_the_rows_and_writes_the_overlay(index, tmp_path, monkeypatch, capsys):
    url, asked = index
    overlay = tmp_path / "config" / "versions.toml"  # not there yet: --write makes it
    monkeypatch.setenv("KBUILD_VERSIONS", str(overlay))
    monkeypatch.setenv("KBUILD_TORCH_INDEX", url)
    assert main(["toolchain", "check-index"]) == 1  # the shipped table has 2.12.0; the index 2.12.1
    out = capsys.readouterr().out
    assert ("the table lacks torch 2.12.1 (the table installs 2.12.0): its wheel requires CUDA 13.0 "
            "(torch-2.12.1-cp311-cp311-manylinux_2_28_x86_64.whl)") in out
    assert f'add to {overlay} (KBUILD_VERSIONS), or run again with --write:\n[torch."2.12"]\nversion = "2.12.1"\n' in out
    assert "2.15" not in out  # kbuild's own table has torch 2.15.0
    assert all(r for path, r in asked if path.startswith("/files/"))  # wheels read by ranges only
    assert not overlay.exists()

    assert main(["toolchain", "check-index", "--write"]) == 0
    assert f"wrote 1 torch row(s) to {overlay} (KBUILD_VERSIONS)" in capsys.readouterr().out
    assert {r.series: r.version for r in full_matrix().torch}[(2, 12)] == "2.12.1"
    assert main(["toolchain", "check-index"]) == 0
    assert f"has every torch release of {url}" in capsys.readouterr().out


def test_an_unreachable_index_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KBUILD_VERSIONS", "off")
    assert main(["toolchain", "check-index", "--index", "http://127.0.0.1:9/simple"]) != 0
    err = capsys.readouterr().err.strip()
    assert err.startswith("kbuild: error: http://127.0.0.1:9/simple/torch/: cannot reach it (") and "\n" not in err
