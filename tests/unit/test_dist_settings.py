"""sccache-dist settings checks (the token stays secret) and the summary line, without servers."""

from __future__ import annotations

from functools import partial

import pytest

from builder.compile.sccache_dist import DistStats
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
