"""Turn a raw request path into a route and its parameters.

Routing reads the *raw* path (ASGI `raw_path`), split on `/` and unquoted one segment at a time,
because huggingface_hub quotes revisions with `safe=""`: `refs%2Fheads%2Fv1` is one segment whose
value is `refs/heads/v1`, which a router on the decoded path would split in two. File paths are
the remaining segments joined with `/`; they are validated (no `..`, no backslash, no NUL, not
absolute) by the store before anything touches a repository.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import unquote

from kbuild_hub.errors import HubError, InvalidPath
from kbuild_hub.route import Route

# URL word → repo type, for `/api/{types}/…` and the `/{types}/…/resolve/…` prefixes.
API_TYPES = {"models": "model", "kernels": "kernel", "datasets": "dataset", "spaces": "space"}
URL_PREFIXES = {"model": "", "kernel": "kernels/", "dataset": "datasets/", "space": "spaces/"}

# A branch or tag name, or a commit sha: git's ref rules, kept conservative.
_REF = re.compile(r"^(?!/)(?!.*//)(?!.*\.\.)(?!.*/$)(?!.*\.lock$)[A-Za-z0-9._/+-]{1,255}\Z")


@dataclass(frozen=True)
class Match:
    route: Route
    params: dict[str, str] = field(default_factory=dict)


def split_raw_path(raw_path: bytes) -> list[str]:
    """`/api/kernels/org/x/tree/refs%2Fheads%2Fv1/build` → ['api', 'kernels', 'org', 'x', 'tree',
    'refs/heads/v1', 'build']. Undecodable bytes are a 400."""
    try:
        text = raw_path.decode("ascii")
        segments = [unquote(s, errors="strict") for s in text.split("/")[1:]]
    except UnicodeDecodeError as e:
        raise InvalidPath("the request path is not valid UTF-8 after percent-decoding") from e
    bad = next((c for s in segments for c in s if ord(c) < 32 or ord(c) == 127), None)
    if bad is not None:  # no name on this hub has them, and they must not reach a header or a log line
        raise InvalidPath(f"the request path has a control character (\\x{ord(bad):02x}, percent-decoded)",
                          hint="NUL, newline and other control characters are not allowed in names or paths")
    if segments and segments[-1] == "":
        segments.pop()  # a trailing slash
    return segments


def match(routes: list[Route], method: str, segments: list[str]) -> Match | None:
    method = "GET" if method == "HEAD" else method
    found_path = False
    for route in routes:
        params = _match_pattern(route.pattern, segments)
        if params is None:
            continue
        found_path = True
        if route.method == method:
            return Match(route, params)
    if found_path:
        raise MethodNotAllowed(f"{method} is not allowed here")
    return None


class MethodNotAllowed(HubError):
    http_status = 405


def _match_pattern(pattern: tuple[str, ...], segments: list[str]) -> dict[str, str] | None:
    params: dict[str, str] = {}
    for i, part in enumerate(pattern):
        if part.startswith("*"):
            params[part[1:]] = "/".join(segments[i:])
            return params
        if i >= len(segments):
            return None
        seg = segments[i]
        if part == "{types}":
            if seg not in API_TYPES:
                return None
            params["repo_type"] = API_TYPES[seg]
        elif part.startswith("{"):
            if seg == "":
                return None
            params[part[1:-1]] = seg
        elif part != seg:
            return None
    return params if len(segments) == len(pattern) else None


def resolve_target(segments: list[str]) -> dict[str, str] | None:
    """The parameters of a `…/resolve/{rev}/{path}` URL: `/{ns}/{name}/resolve/…` for models,
    `/{kernels|datasets|spaces}/{ns}/{name}/resolve/…` for the others."""
    if len(segments) >= 5 and segments[0] in API_TYPES and segments[0] != "models" and segments[3] == "resolve":
        repo_type, rest = API_TYPES[segments[0]], segments[1:]
    elif len(segments) >= 4 and segments[2] == "resolve":
        repo_type, rest = "model", segments
    else:
        return None
    ns, name, _, rev, *path = rest
    if not ns or not name or not path:
        return None
    return {"repo_type": repo_type, "ns": ns, "name": name, "rev": rev, "path": "/".join(path)}


def check_ref(name: str, what: str = "revision") -> str:
    """A branch/tag/sha as it may appear in a URL or a body; `refs/heads/` is allowed in front."""
    if not isinstance(name, str) or not _REF.match(name) or name.startswith("-"):
        raise InvalidPath(f"{what} {name!r} is not a valid git ref name",
                          hint="use a branch such as `main` or `v1`, a tag, or a commit sha")
    return name


def branch_name(name: str) -> str:
    """A branch as written in a URL: `v1` or `refs/heads/v1` → `v1`."""
    check_ref(name, "branch")
    return name[len("refs/heads/"):] if name.startswith("refs/heads/") else name
