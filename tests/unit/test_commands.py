"""The command line is thin (docs/ARCHITECTURE.md, commands/): builder/commands/ holds one module per command, each
with its arguments (`add_parser`) and its handler; no command imports another, none prints, and
main.py holds no handler. The work the handlers used to do is library code, tested here on real
folders and a real local git hub: a workspace published member by member, cleaned member by
member, checked member by member, and the toolchain store pruned."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from builder.commands.main import COMMANDS, main
from cpu_kernel import hub_repo, write_noarch_kernel
from kbuild_common.errors import ManifestError, UsageError

COMMANDS_DIR = Path(__file__).resolve().parents[2] / "builder" / "commands"
SHARED = {"__init__", "main", "arguments"}  # the package, the dispatcher, the shared arguments


def command_modules() -> list[Path]:
    return sorted(p for p in COMMANDS_DIR.glob("*.py") if p.stem not in SHARED)


def test_every_command_module_is_wired_in_and_has_its_parser():
    assert sorted(c.__name__.rpartition(".")[2] for c in COMMANDS) == [p.stem for p in command_modules()]
    assert all(callable(getattr(c, "add_parser", None)) for c in COMMANDS)


@pytest.mark.parametrize("path", command_modules(), ids=lambda p: p.stem)
def test_a_command_imports_no_other_command_and_never_prints(path):
    tree = ast.parse(path.read_text(), str(path))
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    imported |= {f"builder.commands.{a.name}" for n in ast.walk(tree)
                 if isinstance(n, ast.ImportFrom) and n.module == "builder.commands" for a in n.names}
    others = {m for m in imported if m.startswith("builder.commands.")} - {"builder.commands.arguments"}
    assert others == set()  # completion too: main hands it the whole CLI's parser (args.cli_parser)
    prints = [n.lineno for n in ast.walk(tree)
              if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "print"]
    assert prints == []


def test_main_holds_no_handler():
    tree = ast.parse((COMMANDS_DIR / "main.py").read_text())
    handlers = [f.name for f in tree.body if isinstance(f, ast.FunctionDef)
                and [a.arg for a in f.args.args][:2] == ["args", "reporter"]]
    assert handlers == []


# -- the library under the handlers ---------------------------------------------------------------

def workspace(tmp_path: Path, *members: str) -> Path:
    ws = tmp_path / "ws"
    for name in members:
        write_noarch_kernel(ws / "kernels" / name, name, extra=hub_repo(f"me/{name}"))
    (ws / "build.toml").write_text('[workspace]\nmembers = ["kernels/*"]\n')
    return ws


def break_manifest(kernel: Path) -> None:
    text = (kernel / "build.toml").read_text()
    (kernel / "build.toml").write_text(text.replace('license = "Apache-2.0"\n', 'license = "Apache-2.0"\nlicence = 1\n'))


def test_publish_members_refuses_or_skips_each_member_alone(tmp_path):
    from builder.hub.address import parse_hub
    from builder.hub.open import open_hub
    from builder.publish.members import publish_members
    from builder.publish.publish import PublishError, PublishOptions
    from builder.report import Reporter

    ws = workspace(tmp_path, "good", "bad")
    break_manifest(ws / "kernels" / "bad")
    hub = open_hub(parse_hub(str(tmp_path / "hub")), None)
    reporter = Reporter(plain=True)

    # a CI slice: the member that built none of its variants is left alone, the bad one refused
    found = list(publish_members(PublishOptions(ws, variants=("torch-cpu",)), hub, reporter))
    assert [(m.name, m.unbuilt, m.result) for m in found] == [("bad", False, None), ("good", True, None)]
    assert isinstance(found[0].error, ManifestError) and re.search(r"bad/build\.toml:\d+: \[general\] licence",
                                                                   str(found[0].error))
    # no slice: the good member has nothing built, refused as such; neither holds the other back
    found = list(publish_members(PublishOptions(ws), hub, reporter))
    assert [m.name for m in found] == ["bad", "good"]
    assert isinstance(found[1].error, PublishError) and "nothing built to publish" in str(found[1].error)
    assert not (tmp_path / "hub").exists()  # nothing was written

    with pytest.raises(UsageError, match="--repo-id names one repo"):
        next(publish_members(PublishOptions(ws, repo_id="me/one"), hub, reporter))
    with pytest.raises(PublishError, match="nothing built to publish"):  # a lone kernel's error is raised
        next(publish_members(PublishOptions(ws / "kernels" / "good"), hub, reporter))


def test_publish_of_a_workspace_names_each_refused_member(tmp_path, capsys):
    ws = workspace(tmp_path, "good", "bad")
    break_manifest(ws / "kernels" / "bad")
    assert main(["publish", str(ws), "--hub", str(tmp_path / "hub"), "--variant", "torch-cpu"]) == 2
    err = capsys.readouterr().err
    assert re.search(r"kbuild: error: bad: not published: \S*bad/build\.toml:\d+: \[general\] licence", err), err
    assert "good: none of torch-cpu is built here; not published" in err
    assert "not published: bad (1 of 2 kernels)" in err


def test_clean_removes_each_members_builds_as_it_goes(tmp_path):
    from builder.stage.clean import clean

    ws = workspace(tmp_path, "a", "b")
    a, b = ws / "kernels" / "a", ws / "kernels" / "b"
    for path in (a / "build" / "torch-cpu" / "x.py", a / ".kbuild" / "obj.o", b / "build" / ".torch-cpu.tmp-7" / "y"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("12345")
    planned = [(r.path, r.why, r.size) for r in clean(ws, stale_only=False, dry_run=True)]
    assert planned == [(a / "build" / "torch-cpu", "a built variant", 5),
                       (a / ".kbuild", "objects, logs and the ninja graph", 5),
                       (b / "build" / ".torch-cpu.tmp-7", "left by an interrupted build", 5)]
    assert (a / "build" / "torch-cpu").is_dir()  # a dry run removes nothing
    assert [(r.path, r.why, r.size) for r in clean(ws, stale_only=False, dry_run=False)] == planned
    assert not (a / "build").exists() and not (a / ".kbuild").exists() and not (b / "build").exists()
    assert list(clean(ws, stale_only=False, dry_run=False)) == []


def test_check_members_reads_every_member_before_raising(tmp_path):
    from builder.project.workspace import check_members

    ws = workspace(tmp_path, "ka", "kb", "kc")
    break_manifest(ws / "kernels" / "ka")
    break_manifest(ws / "kernels" / "kc")
    members = check_members(ws)
    assert next(members).name == "kb"  # the good one, after the bad ka
    with pytest.raises(ManifestError) as raised:
        next(members)
    assert [Path(str(e).split(":")[0]).parent.name for e in raised.value.errors] == ["ka", "kc"]


def test_prune_refuses_unknown_names_before_removing_anything(tmp_path):
    from builder.toolchains.provision import ToolchainStore
    from builder.toolchains.prune import prune

    store = ToolchainStore(tmp_path / "store")
    leftover = tmp_path / "store" / ".torch-2.13.0.tmp-4194999"  # above any pid_max: no such process
    leftover.mkdir(parents=True)
    with pytest.raises(UsageError, match=r"prune: no toolchain cuda-13\.2 in \S+ \(installed: none\)"):
        list(prune(store, ["cuda-13.2"], every=False, dry_run=False))
    with pytest.raises(UsageError, match="pass toolchain names or --all, not both"):
        list(prune(store, ["cuda-13.2"], every=True, dry_run=False))
    assert leftover.is_dir()
    assert [(p.path, p.name, p.why) for p in prune(store, [], every=False, dry_run=True)] == [
        (leftover, "", "left by an interrupted install")]
    assert leftover.is_dir()
    assert len(list(prune(store, [], every=False, dry_run=False))) == 1 and not leftover.exists()
