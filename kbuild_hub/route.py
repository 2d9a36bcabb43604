"""What one endpoint of `kbuild hub serve` declares: its method, its path pattern, its handler,
who may call it and how its body is read. The server's API routes (server/app.py) and the web
pages' (pages/routes.py) are both lists of them, and the server matches a request against both
(server/routing.py), so the declaration stands below the two."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Route:
    method: str
    pattern: tuple[str, ...]  # literal, "{name}" (one segment), "*name" (the rest, may be empty)
    handler: Callable
    access: str  # "none" | "read" | "write" | "user"
    body: str = "json"  # "json" | "form" | "stream" (spooled to a temporary file) | "none"
    page: bool = False  # a web page: a refused read asks the browser for the token (Basic)
