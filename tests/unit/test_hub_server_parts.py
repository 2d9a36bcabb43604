"""The hub server's parts by value: raw paths, byte ranges, commit payloads, access rules, tokens."""

from __future__ import annotations

import base64
import io
import json
import os
import stat
from pathlib import Path

import pytest

from builder.commands import hub as serve_cli
from builder.commands.main import parser as kbuild_parser
from kbuild_common.errors import UsageError
from kbuild_hub.errors import HubError, TooLarge
from kbuild_hub.paths import validate_path
from kbuild_hub.server import Tokens, load_tokens
from kbuild_hub.server.auth import Forbidden, Unauthorized, check_access
from kbuild_hub.server.files import RangeNotSatisfiable, byte_range
from kbuild_hub.server.payload import parse_commit
from kbuild_hub.server.routing import resolve_target, split_raw_path

# -- pure pieces ------------------------------------------------------------------------------

def test_raw_path_keeps_an_encoded_revision_in_one_segment():
    assert split_raw_path(b"/api/kernels/org/x/tree/refs%2Fheads%2Fv1/build%2Ftorch-cpu") == [
        "api", "kernels", "org", "x", "tree", "refs/heads/v1", "build/torch-cpu"]
    assert resolve_target(["kernels", "org", "x", "resolve", "v1", "build", "a.py"]) == {
        "repo_type": "kernel", "ns": "org", "name": "x", "rev": "v1", "path": "build/a.py"}
    assert resolve_target(["org", "x", "resolve", "main", "a.py"])["repo_type"] == "model"


def test_byte_ranges():
    assert byte_range(None, 10) is None
    assert byte_range("bytes=2-4", 10) == (2, 5)
    assert byte_range("bytes=7-", 10) == (7, 10)
    assert byte_range("bytes=-3", 10) == (7, 10)
    assert byte_range("bytes=0-99", 10) == (0, 10)
    assert byte_range("bytes=0-1,4-5", 10) is None  # several ranges: the whole file
    with pytest.raises(RangeNotSatisfiable):
        byte_range("bytes=10-", 10)


def _ndjson(*items) -> io.BytesIO:
    return io.BytesIO(b"".join(json.dumps(x).encode() + b"\n" for x in items))


def _file(path: str, data: bytes) -> dict:
    return {"key": "file", "value": {"content": base64.b64encode(data).decode(), "path": path, "encoding": "base64"}}


def test_commit_payload_small_and_streamed_files(tmp_path):
    big = os.urandom(3 << 20)  # a long line: decoded in chunks into a file
    ops = parse_commit(_ndjson({"key": "header", "value": {"summary": "s", "parentCommit": "a" * 40}},
                               _file("a.py", b"x = 1\n"), _file("build/big.bin", big),
                               {"key": "deletedFile", "value": {"path": "old.py"}},
                               {"key": "deletedFolder", "value": {"path": "build/torch-old/"}}),
                       validate_path, None, tmp_path)
    assert (ops.message, ops.parent, ops.delete, ops.delete_dirs) == ("s", "a" * 40, ["old.py"], ["build/torch-old"])
    assert ops.add["a.py"].source == b"x = 1\n"
    assert Path(ops.add["build/big.bin"].source).read_bytes() == big


@pytest.mark.parametrize("lines, error", [
    ([_file("a.py", b"x")], HubError),  # no header first
    ([{"key": "header", "value": {}}, {"key": "lfsFile", "value": {"path": "a", "oid": "0" * 64}}], HubError),
    ([{"key": "header", "value": {}}, _file("../a.py", b"x")], HubError),
    ([{"key": "header", "value": {}}, _file("big.bin", b"y" * 200_000)], TooLarge),
    ([{"key": "header", "value": {}}, {"key": "file", "value": {"content": "QUF\\/" * 30_000, "path": "p"}}], HubError),
])
def test_commit_payload_errors(tmp_path, lines, error):
    with pytest.raises(error):
        parse_commit(_ndjson(*lines), validate_path, 100_000, tmp_path)


def test_access_rules():
    tokens = Tokens(("good",), Path("t"))
    check_access(tokens, "read", None, public_read=True)
    check_access(tokens, "read", "stale-hf-token", public_read=True)  # ignored on public reads
    check_access(tokens, "write", "good", public_read=True)
    with pytest.raises(Unauthorized):
        check_access(tokens, "write", None, public_read=True)
    with pytest.raises(Forbidden):
        check_access(tokens, "write", "bad", public_read=True)
    with pytest.raises(Unauthorized):
        check_access(tokens, "read", None, public_read=False)


def test_generated_token_is_private(tmp_path):
    tokens = load_tokens(None, tmp_path)
    path = tmp_path / ".token"
    assert tokens.generated and tokens.values == (path.read_text().strip(),)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_tokens(None, tmp_path).values == tokens.values  # reused on the next start
    (tmp_path / "tokens.txt").write_text("# ci\nalpha\n\nbeta\n")
    (tmp_path / "tokens.txt").chmod(0o600)
    assert load_tokens(tmp_path / "tokens.txt", tmp_path).values == ("alpha", "beta")


def test_token_files_that_are_links_or_readable_by_others_are_refused(tmp_path):
    """Issue 10, finding 10: a 0644 --token-file was accepted; a linked .token was followed (and a
    link to a missing file was created through, its target given the token)."""
    shared = tmp_path / "tokens.txt"
    shared.write_text("alpha\n")
    shared.chmod(0o644)
    with pytest.raises(HubError, match=r"readable by others \(mode 0644\)"):
        load_tokens(shared, tmp_path)
    root = tmp_path / "hub"
    root.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    victim.chmod(0o600)
    (root / ".token").symlink_to(victim)
    with pytest.raises(HubError, match="symbolic link"):
        load_tokens(None, root)
    assert victim.read_text() == "precious\n"
    (root / ".token").unlink()
    (root / ".token").symlink_to(tmp_path / "elsewhere")  # dangling: would be created through
    with pytest.raises(HubError, match="symbolic link"):
        load_tokens(None, root)
    assert not (tmp_path / "elsewhere").exists()


def test_cli_arguments():
    parser = kbuild_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    if "hub" not in sub.choices:
        serve_cli.add_parser(sub)
    args = parser.parse_args(["hub", "serve", "--root", "/tmp/h", "--port", "0", "--private",
                              "--max-file-size", "100", "--trusted-org", "acme"])
    assert (args.root, args.port, args.public_read, args.max_file_size, args.trusted_org) == (
        Path("/tmp/h"), 0, False, 100, ["acme"])
    assert parser.parse_args(["hub", "serve"]).public_read is True


def test_serve_options_are_resolved_once_into_one_object(tmp_path):
    """config/hub_service.py: the flags, KBUILD_HUB_UPSTREAM and the token files become the one
    frozen ServeOptions the server takes."""
    from builder.config.environment import from_environment
    from builder.config.hub_service import serve_options

    parser = kbuild_parser()
    tokens = tmp_path / "tokens"
    tokens.write_text("kb_one\nkb_two\n")
    tokens.chmod(0o600)
    args = parser.parse_args(["hub", "serve", "--root", str(tmp_path / "hub"), "--port", "0", "--private",
                              "--token-file", str(tokens), "--trusted-org", "acme", "--upstream-org", "acme",
                              "--upstream-timeout", "1", "2"])
    options = serve_options(args, from_environment({"KBUILD_HUB_UPSTREAM": "https://up.example/"}))
    assert (options.root, options.port, options.public_read, options.tokens.values, options.trusted_orgs) == (
        tmp_path / "hub", 0, False, ("kb_one", "kb_two"), frozenset({"acme"}))
    upstream = options.upstream
    assert (upstream.url, upstream.token, upstream.read_timeout) == ("https://up.example", None, 2)
    assert options.upstream_orgs == frozenset({"acme"}) and not options.allow_shadowing
    # `off` turns the variable's upstream off; the write token is then <root>/.token, made once
    offline = serve_options(parser.parse_args(["hub", "serve", "--root", str(tmp_path / "hub")]),
                            from_environment({"KBUILD_HUB_UPSTREAM": "off"}))
    assert offline.upstream is None and offline.tokens.generated
    assert offline.tokens.source == tmp_path / "hub" / ".token"
    with pytest.raises(UsageError, match=r"^--max-connections-per-client: expected a positive number, got 0$"):
        serve_options(parser.parse_args(["hub", "serve", "--max-connections-per-client", "0"]), from_environment({}))


@pytest.mark.parametrize("text, endpoint", [(" https://huggingface.co/ ", "https://huggingface.co"),
                                            ("http://127.0.0.1:8080", "http://127.0.0.1:8080"),
                                            ("/a/folder", None), ("ftp://x.org", None), ("https://x.org/?a=1", None),
                                            ("https://x.org/#f", None), ("http://", None), ("", None)])
def test_an_http_hub_url_goes_through_the_one_hub_address_parser(text, endpoint):
    from builder.hub.address import parse_hub_url

    if endpoint is not None:
        assert parse_hub_url(text, "--from") == endpoint
    else:
        with pytest.raises(UsageError, match=r"^--from: expected an http\(s\) URL of a hub"):
            parse_hub_url(text, "--from")
