"""Malformed client input to `kbuild hub serve` (issue 26): every body of the campaign's classes
answers a 4xx that names the field, NUL and control characters in paths a clean 400, and a
bounded fuzz over the endpoints' JSON shapes never gets a 500. Real server on 127.0.0.1."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir

from hubserver import TOKEN, ServerThread

# hypothesis keeps caches in ./.hypothesis, which pytest would then warn about collecting
set_hypothesis_home_dir(Path(tempfile.gettempdir()) / "kbuild-hypothesis")

AUTH = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
REPO = "/api/kernels/org/fuzz"
FUZZ = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    running = ServerThread(tmp_path_factory.mktemp("malformed") / "hub", max_file_size=1 << 20)
    status, _, _ = running.raw("POST", "/api/repos/create", json.dumps({"organization": "org", "name": "fuzz",
                                                                         "type": "kernel"}).encode(), AUTH)
    assert status == 200
    yield running
    running.stop()


def answer(server, method, path, body: bytes | None = None, headers=AUTH):
    status, head, raw = server.raw(method, path, body, headers)
    message = head.get("x-error-message", "")
    assert status < 500, (status, path, body[:200] if body else None, raw[:300])
    assert all(32 <= ord(c) != 127 for c in message), message  # a header value, escaped
    return status, message


@pytest.mark.parametrize("files, field", [
    ([1], "files[0]"), ([None], "files[0]"), ([[]], "files[0]"), (["a"], "files[0]"),
    ([{"path": "ok", "size": 1}, {"path": 7}], "files[1].path"),
    ([{"path": "a", "size": "big"}], "files[0].size"),
    ([{"path": "\ud800x", "size": 1}], "lone surrogate"),
    ({"path": "a"}, '"files"'),
])
def test_preupload_bodies_answer_400_naming_the_field(server, files, field):
    status, message = answer(server, "POST", f"{REPO}/preupload/main", json.dumps({"files": files}).encode())
    assert status == 400 and field in message, message


def test_an_upload_declared_over_the_limit_is_refused_before_its_body(server):
    # --max-commit-size here is unset, --max-file-size 1 MiB: the preupload says it, before any byte
    status, message = answer(server, "POST", f"{REPO}/preupload/main",
                             json.dumps({"files": [{"path": "big.bin", "size": 2 << 20, "sample": ""}]}).encode())
    assert status == 413 and "1048576" in message


@pytest.mark.parametrize("path", [
    "/api/organizations/%00/overview", "/kernels/org/fuzz/resolve/main/a%00b", "/api/kernels/org/fu%0Azz/refs",
    "/kernels/org/fuzz/resolve/main/x%1b%5B31m", "/api/kernels/org/fuzz/tree/main/a%7Fb",
])
def test_control_characters_in_paths_answer_a_clean_400(server, path):
    status, message = answer(server, "GET", path, headers={})
    assert status == 400 and "control character" in message


def test_a_private_hub_without_a_token_says_a_token_is_needed(tmp_path):
    from huggingface_hub import HfApi, hf_hub_download
    from huggingface_hub.errors import RepositoryNotFoundError

    private = ServerThread(tmp_path / "hub", public_read=False)
    try:
        HfApi(endpoint=private.url, token=TOKEN).create_repo("org/p", repo_type="kernel")
        status, head, _ = private.raw("GET", "/api/kernels/org/p/refs")
        assert status == 401 and head["www-authenticate"].startswith("Bearer")
        assert "private" in head["x-error-message"] and "token" in head["x-error-message"]
        # huggingface_hub still raises what loaders catch for a private or missing repo, with the reason
        for call in (lambda: HfApi(endpoint=private.url, token=False).list_repo_refs("org/p", repo_type="kernel"),
                     lambda: hf_hub_download("org/p", "x", repo_type="kernel", endpoint=private.url, token=False,
                                             cache_dir=str(tmp_path / "hf"))):
            with pytest.raises(RepositoryNotFoundError, match="this hub is private"):
                call()
    finally:
        private.stop()


# -- a bounded fuzz over the JSON shapes -----------------------------------------------------------

text = st.one_of(st.text(max_size=12), st.sampled_from(["\ud800", "a\x00b", "../x", "/abs", "a/./b", ".git/x",
                                                        "main", "refs/heads/v1", "x" * 300, "\\x", "C:x"]))
scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70), st.floats(), text)
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(text, inner, max_size=4)), max_leaves=12)


def fields(*names):
    """Objects with the endpoint's own field names, each holding anything."""
    return st.dictionaries(st.sampled_from(names), values, max_size=len(names))


@FUZZ
@given(body=st.one_of(values, fields("organization", "name", "type", "private")))
def test_fuzz_create_repo(server, body):
    answer(server, "POST", "/api/repos/create", json.dumps(body).encode())


@FUZZ
@given(body=st.one_of(values, fields("files"), st.builds(lambda f: {"files": f},
                                                          st.lists(fields("path", "size", "sample"), max_size=3))))
def test_fuzz_preupload(server, body):
    answer(server, "POST", f"{REPO}/preupload/main", json.dumps(body).encode())


@FUZZ
@given(body=st.one_of(values, fields("startingPoint")), branch=text)
def test_fuzz_create_branch(server, body, branch):
    from urllib.parse import quote

    answer(server, "POST", f"{REPO}/branch/{quote(branch, safe='', errors='surrogatepass') or 'x'}", json.dumps(body).encode())


line = st.one_of(values, st.builds(lambda k, v: {"key": k, "value": v},
                                   st.one_of(st.sampled_from(["header", "file", "deletedFile", "deletedFolder",
                                                              "lfsFile"]), values),
                                   st.one_of(values, fields("summary", "description", "parentCommit", "path",
                                                            "content", "encoding"))))


@FUZZ
@given(lines=st.lists(line, max_size=4), header_first=st.booleans())
def test_fuzz_commit(server, lines, header_first):
    if header_first:
        lines = [{"key": "header", "value": {"summary": "fuzz"}}, *lines]
    body = "\n".join(json.dumps(x) for x in lines).encode()
    answer(server, "POST", f"{REPO}/commit/main", body, {**AUTH, "Content-Type": "application/x-ndjson"})


@FUZZ
@given(form=st.lists(st.tuples(st.sampled_from(["paths", "expand", "x"]), text), max_size=5))
def test_fuzz_paths_info(server, form):
    from urllib.parse import quote, urlencode

    body = urlencode(form, quote_via=lambda v, safe, *_: quote(v, safe, errors="surrogatepass"))
    answer(server, "POST", f"{REPO}/paths-info/main", body.encode(),
           {"Content-Type": "application/x-www-form-urlencoded"})


@FUZZ
@given(segments=st.lists(text, min_size=1, max_size=4), method=st.sampled_from(["GET", "HEAD", "DELETE"]))
def test_fuzz_paths(server, segments, method):
    from urllib.parse import quote

    for prefix in ("/api/kernels/org/fuzz/tree/main/", "/kernels/org/fuzz/resolve/main/", "/api/organizations/",
                   "/api/kernels/org/fuzz/revision/"):
        answer(server, method, prefix + "/".join(quote(s, safe="", errors="surrogatepass") for s in segments), headers={})
