"""The settings cascade (builder/config/cascade.py): flag > environment > build.toml > default,
each value with its origin; `off` in the environment turns a build.toml's setting off; and the
settings a build reads (archs, NVCC_THREADS, manylinux) resolved through it by the CLI, their
errors naming where the bad value was written."""

from __future__ import annotations

import ast
import re
from dataclasses import fields
from pathlib import Path

import pytest

from builder.backends.cuda_arch import parse_arch_list
from builder.commands.arguments import build_options
from builder.commands.main import parser
from builder.config.cascade import DEFAULT, Setting, resolve
from builder.config.environment import from_environment
from builder.config.options import BuildOptions
from kbuild_common.errors import ManifestError, UsageError
from plan_inputs import COMPILED, write_kernel

FLAG = ("--level", "flag")
ENV = ("LEVEL", "env")


def toml(text="toml", origin="build.toml:3: [workspace.x] level"):
    return lambda: (text, origin)


def never():
    raise AssertionError("the build.toml is read only when no flag or variable names the setting")


def number(text: str, origin: str, error: type) -> int:
    if not text.isdigit():
        raise error(f"{origin}: expected a number, got {text!r}")
    return int(text)


def test_each_source_wins_over_the_ones_after_it():
    assert resolve(flag=FLAG, env=ENV, toml=never, default="d") == Setting("flag", "--level")
    assert resolve(flag=("--level", None), env=ENV, toml=never, default="d") == Setting("env", "LEVEL")
    assert resolve(flag=("--level", None), env=("LEVEL", None), toml=toml(), default="d") == \
        Setting("toml", "build.toml:3: [workspace.x] level")
    assert resolve(flag=("--level", None), env=("LEVEL", None), toml=lambda: None, default="d") == \
        Setting("d", DEFAULT)
    assert resolve(flag=("--level", None), env=("LEVEL", None), toml=lambda: None) is None


def test_an_empty_variable_is_unset_but_an_empty_flag_is_given():
    assert resolve(env=("LEVEL", ""), toml=toml()) == Setting("toml", "build.toml:3: [workspace.x] level")
    with pytest.raises(UsageError, match="^--level: expected a number, got ''$"):
        resolve(flag=("--level", ""), env=ENV, parse=number)


def test_off_turns_the_build_toml_setting_off_only_where_allowed():
    off = resolve(env=("LEVEL", " off "), toml=never, can_turn_off=True)
    assert off == Setting(None, "LEVEL=off")
    assert resolve(flag=FLAG, env=("LEVEL", "off"), can_turn_off=True) == Setting("flag", "--level")  # a flag wins
    # where nothing can be turned off, `off` is a value like any other
    assert resolve(env=("LEVEL", "off")) == Setting("off", "LEVEL")
    with pytest.raises(UsageError, match="^LEVEL: expected a number, got 'off'$"):
        resolve(env=("LEVEL", "off"), parse=number)


def test_a_bad_value_names_its_origin_with_the_error_kind_of_its_source():
    assert resolve(env=("LEVEL", "7"), parse=number) == Setting(7, "LEVEL")
    with pytest.raises(UsageError, match="^--level: expected a number"):
        resolve(flag=("--level", "x"), parse=number)
    with pytest.raises(UsageError, match="^LEVEL: expected a number"):
        resolve(env=("LEVEL", "x"), parse=number)
    with pytest.raises(ManifestError, match=r"^build.toml:3: \[workspace.x\] level: expected a number, got 'x'$"):
        resolve(toml=toml("x"), parse=number)


def options(tmp_path, monkeypatch, *argv, **env) -> BuildOptions:
    """BuildOptions as `kbuild build` reads them, with exactly `env` of the variables it reads."""
    for name in ("TORCH_CUDA_ARCH_LIST", "NVCC_THREADS", "KBUILD_REMOTE_CACHE", "KBUILD_DIST_SCHEDULER"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return build_options(parser().parse_args(["build", str(tmp_path), *argv]))


def test_the_arch_setting_is_parsed_once_and_keeps_its_origin(tmp_path, monkeypatch):
    assert options(tmp_path, monkeypatch).cuda_archs is None
    from_env = options(tmp_path, monkeypatch, TORCH_CUDA_ARCH_LIST="8.0 9.0a")
    assert from_env.cuda_archs == Setting(parse_arch_list("8.0;9.0a", "x"), "TORCH_CUDA_ARCH_LIST")
    assert [str(c) for c in from_env.cuda_archs.value] == ["8.0", "9.0a"]
    flag = options(tmp_path, monkeypatch, "--cuda-archs", "9.0", TORCH_CUDA_ARCH_LIST="8.0")
    assert flag.cuda_archs == Setting(parse_arch_list("9.0", "x"), "--cuda-archs")
    with pytest.raises(UsageError, match="^TORCH_CUDA_ARCH_LIST: "):
        options(tmp_path, monkeypatch, TORCH_CUDA_ARCH_LIST="8.0;sm_90")
    with pytest.raises(UsageError, match='^--cuda-archs: unknown capability "8.5"'):
        options(tmp_path, monkeypatch, "--cuda-archs", "8.0;8.5")


def test_a_command_without_the_arch_flag_reads_no_archs(tmp_path, monkeypatch):
    # `kbuild variants` lists every arch: a bad (or `native`) TORCH_CUDA_ARCH_LIST is not its concern
    for name in ("TORCH_CUDA_ARCH_LIST", "KBUILD_REMOTE_CACHE", "KBUILD_DIST_SCHEDULER"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "8.0;sm_90")
    assert build_options(parser().parse_args(["variants", str(tmp_path)])).cuda_archs is None


def test_planning_writes_nothing_into_the_options():
    # what the planner derives (include folders, sysroots) is plan/planner.py's Resolved
    assert {"resolved_archs", "dependency_includes", "sysroots", "cuda_archs_from"}.isdisjoint(
        f.name for f in fields(BuildOptions))


def test_nvcc_threads_goes_through_the_cascade(tmp_path, monkeypatch):
    assert options(tmp_path, monkeypatch).nvcc_threads is None
    assert options(tmp_path, monkeypatch, NVCC_THREADS="3").nvcc_threads == 3
    with pytest.raises(UsageError, match="^NVCC_THREADS: expected a positive number, got '0'$"):
        options(tmp_path, monkeypatch, NVCC_THREADS="0")


def test_manylinux_flag_then_the_kernels_own_policy(tmp_path, monkeypatch):
    toml = COMPILED.format(backends='["cpu", "cuda"]', torch_extra="", cuda_extra="")
    m = write_kernel(tmp_path / "k", toml.replace('edition = 5\n', 'edition = 5\nmanylinux = "2_28"\n'))
    mine = BuildOptions(tmp_path).manylinux_for(m)
    assert mine.value == "2_28" and mine.origin.endswith("build.toml:5: [general] manylinux")
    flagged = options(tmp_path, monkeypatch, "--manylinux", "2_34")
    assert flagged.manylinux_for(m) == Setting("2_34", "--manylinux")
    with pytest.raises(UsageError, match='^--manylinux: unknown manylinux policy "2_99"'):
        options(tmp_path, monkeypatch, "--manylinux", "2_99")


def environment_reads(source: str) -> list[int]:
    """Lines where `source` reads the environment (os.environ's values or keys, os.getenv);
    handing the whole of it to a child process ({**os.environ, ...}) reads no setting."""
    tree = ast.parse(source)
    passed_on = {id(v) for node in ast.walk(tree) if isinstance(node, ast.Dict)
                 for k, v in zip(node.keys, node.values, strict=True) if k is None}
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "os"
            and node.attr in ("environ", "getenv", "environb") and id(node) not in passed_on]


def test_only_the_settings_read_the_environment():
    assert environment_reads("import os\nx = os.environ.get('A')\ny = {**os.environ, 'B': '1'}\n") == [2]
    builder = Path(__file__).resolve().parents[2] / "builder"
    readers = {str(p.relative_to(builder)): lines for p in sorted(builder.rglob("*.py"))
               if (lines := environment_reads(p.read_text()))}
    assert readers == {"config/environment.py": readers.get("config/environment.py")}, readers


# -- the hub address ------------------------------------------------------------------------------

def test_the_hub_follows_the_cascade_and_keeps_its_origin(tmp_path):
    local = str(tmp_path / "hub")
    both = from_environment({"KBUILD_HUB": local, "HF_ENDPOINT": "http://127.0.0.1:9"})
    assert both.hub_setting("http://127.0.0.1:8") == Setting("http://127.0.0.1:8", "--hub")
    assert both.hub_setting(None) == Setting(local, "KBUILD_HUB")  # the runtime's rule: KBUILD_HUB first
    assert from_environment({"HF_ENDPOINT": "http://127.0.0.1:9"}).hub_setting(None) == \
        Setting("http://127.0.0.1:9", "HF_ENDPOINT")
    default = from_environment({}).hub_setting(None)
    assert default.value is None and default.origin.startswith("default (") and "kbuild" in default.origin


@pytest.mark.parametrize("env, flag, named", [({"KBUILD_HUB": "ftp://x"}, None, "KBUILD_HUB"),
                                              ({"HF_ENDPOINT": "ftp://x"}, None, "HF_ENDPOINT"),
                                              ({"HF_ENDPOINT": "ftp://x"}, "ftp://y", "--hub")])
def test_a_bad_hub_address_names_where_it_came_from(env, flag, named):
    with pytest.raises(UsageError, match=rf"^{re.escape(named)}: "):
        from_environment(env).hub_setting(flag)


def test_every_command_with_a_hub_reads_it_through_the_settings_cascade():
    # `args.hub or settings.hub` was written in five commands; now one method decides
    commands = Path(__file__).resolve().parents[2] / "builder" / "commands"
    for path in commands.glob("*.py"):
        text = path.read_text()
        assert "settings.hub " not in text and "settings.hub)" not in text and "or settings.hub" not in text, path
        if "args.hub" in text:
            assert "hub_setting(args.hub)" in text or "hub_address(args.hub)" in text, path
