"""`kbuild variants`: the plan's rows (planner.variant_rows), and why none of them is this
environment's when its torch or nvcc is unusable."""

from __future__ import annotations

from builder.config.options import BuildOptions
from builder.plan.planner import variant_rows
from builder.toolchains.toolchain import find_toolchain
from kbuild_common.errors import ToolchainError


def variant_listing(options: BuildOptions) -> tuple[list[dict], str | None]:
    """(rows, why none is this environment's: None when some row is, or nothing says why)."""
    rows = variant_rows(options)
    if any(r.get("here") for r in rows):
        return rows, None
    try:
        find_toolchain(options)
    except ToolchainError as e:
        return rows, str(e)
    return rows, None
