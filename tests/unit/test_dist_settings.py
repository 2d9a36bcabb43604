"""sccache-dist settings checks (the token stays secret) and the summary line, without servers."""

from __future__ import annotations

from functools import partial

import pytest

from builder.compile.sccache_dist import DistStats, fallback_reasons
from builder.config.dist import DistSettings, resolve_dist
from builder.project.workspace import workspace_url
from kbuild_common.errors import ManifestError, UsageError


def test_settings_are_checked_and_the_token_stays_secret(tmp_path, capsys, monkeypatch):
    folder = tmp_path / "ws"
    folder.mkdir()
    workspace = partial(workspace_url, folder)  # as the command hands it in
    with pytest.raises(UsageError, match="KBUILD_DIST_TOKEN is not set: distributed compiles \\(--dist\\)"):
        resolve_dist("http://127.0.0.1:1", None, None, workspace)
    with pytest.raises(UsageError, match="KBUILD_DIST_SCHEDULER: expected the sccache-dist scheduler's URL"):
        resolve_dist(None, "127.0.0.1:10600", "t", workspace)
    assert resolve_dist(None, "off", None, workspace) is None
    (folder / "build.toml").write_text('[workspace]\nmembers = ["k/*"]\n[workspace.dist]\nscheduler = "http://s:10600"\n')
    found = resolve_dist(None, None, "s3cret", workspace)
    assert found == DistSettings("http://s:10600", f"{folder}/build.toml: [workspace.dist] scheduler", "s3cret")
    assert "s3cret" not in repr(found)
    (folder / "build.toml").write_text('[workspace]\nmembers = ["k/*"]\n[workspace.dist]\ntoken = "x"\n')
    with pytest.raises(ManifestError, match=r"\[workspace.dist\] token: unknown key \(expected: scheduler; the token "
                                            r"comes from KBUILD_DIST_TOKEN\)"):
        resolve_dist(None, None, "t", workspace)


def test_the_summary_line():
    stats = DistStats(10, {"127.0.0.1:2": 5, "127.0.0.1:1": 4}, 0, {"c++ [gcc]": 3, "ptx [cicc]": 2})
    assert stats.line() == ("distributed compiles: 9 of 10 on 2 server(s) (127.0.0.1:1: 4, 127.0.0.1:2: 5), 1 here; "
                            "steps: c++ [gcc] 3, ptx [cicc] 2")
    assert "2 could not be distributed" in DistStats(3, {}, 2, {}).line()


# sccache 0.16's client log, as a build whose servers had gone away wrote it (tests/integration/test_dist.py)
REFUSED = ('[2026-12-07T06:45:03Z WARN  sccache::compiler::compiler] [torch_binding.cpp.o]: Could not perform di'
           'stributed compile, falling back to local: Error 500: {"description":"assign job failed, job un-assig'
           'ned from the server","cause":{"description":"POST to scheduler assign_job failed","cause":{"descript'
           'ion":"error sending request for url (https://127.0.0.1:39205/api/v1/distserver/assign_job/0)","cause'
           '":{"description":"client error (Connect)","cause":{"description":"tcp connect error","cause":{"descr'
           'iption":"Connection refused (os error 111)","cause":null}}}}}}')


def test_why_compiles_were_not_distributed_is_read_from_sccache_log(tmp_path):
    log = tmp_path / "client.log"
    assert fallback_reasons(log) == {}  # no log: no reasons, no error
    full = "[a.o]: Could not perform distributed compile, falling back to local: "
    log.write_text("\n".join([
        REFUSED, REFUSED.replace("assign_job/0", "assign_job/7").replace("torch_binding.cpp.o", "b.o"),
        full + "Insufficient capacity across 2 available servers: Failed to allocate job",
        full + "Error 500: {not json",
        "[2026-12-07T06:45:03Z INFO  sccache::server] compiled b.o",
    ]))
    assert fallback_reasons(log) == {
        # the scheduler's chain of causes: its first description and the root cause, no URL or job number
        "assign job failed, job un-assigned from the server: Connection refused (os error 111)": 2,
        "Insufficient capacity across 2 available servers: Failed to allocate job": 1,
        "Error 500: {not json": 1,
    }
