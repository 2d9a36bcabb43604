"""The one precedence every setting goes through: a command-line flag, else an environment
variable, else a build.toml value (the workspace's or the kernel's), else a default. The value
found keeps where it came from, so an error (and `--debug`) can name the flag, the variable or the
file and line that set it.

An environment variable may also turn a build.toml setting off (`KBUILD_REMOTE_CACHE=off`): the
result is then a Setting whose value is None, its origin the variable.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from kbuild_common.errors import ManifestError, UsageError

T = TypeVar("T")
OFF = "off"  # an environment variable's value that turns the build.toml's setting off
DEFAULT = "default"  # the origin of a value no flag, variable or build.toml named

# what a build.toml source returns: (text as written, "file:line: [table] key"), or None when unset
TomlSource = Callable[[], "tuple[str, str] | None"]
# turns a source's text into the setting's value; raises `error` with a message led by `origin`
Parse = Callable[[str, str, type], object]
# reads the string `[workspace.<table>] <key>` of the build's workspace as a TomlSource does (None:
# unset); the command hands in project/workspace.py's workspace_url bound to its folder, so the
# settings read a build.toml without importing the project's readers
WorkspaceValue = Callable[..., "tuple[str, str] | None"]


@dataclass(frozen=True)
class Setting(Generic[T]):
    value: T
    origin: str  # "--cuda-archs", "TORCH_CUDA_ARCH_LIST", "<file>:<line>: [general] manylinux", "default"

    def __str__(self) -> str:
        return f"{self.value} ({self.origin})"


def resolve(*, flag: tuple[str, str | None] | None = None, env: tuple[str, str | None] | None = None,
            toml: TomlSource | None = None, default: T | None = None, parse: Parse | None = None,
            can_turn_off: bool = False) -> Setting | None:
    """The setting from the first source that names it: `flag` and `env` are (name, text as given;
    None when not given; an empty variable counts as unset), `toml` is read only when neither
    does (a build.toml's table is checked only when it is used). `parse` checks the text, with
    UsageError for a flag or variable and ManifestError for a build.toml. None when no source
    names it and there is no default."""
    if flag is not None and flag[1] is not None:
        return _parsed(flag[1], flag[0], parse, UsageError)
    if env is not None and env[1]:
        if can_turn_off and env[1].strip() == OFF:
            return Setting(None, f"{env[0]}={OFF}")
        return _parsed(env[1], env[0], parse, UsageError)
    found = toml() if toml is not None else None
    if found is not None:
        return _parsed(found[0], found[1], parse, ManifestError)
    return None if default is None else Setting(default, DEFAULT)


def value(setting: Setting | None):
    """The setting's value; None when unset or turned off."""
    return None if setting is None else setting.value


def _parsed(text: str, origin: str, parse: Parse | None, error: type) -> Setting:
    return Setting(text if parse is None else parse(text, origin, error), origin)
