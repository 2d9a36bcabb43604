"""A variant download's size budget: what its files may write in total, shared by the parallel
downloads of one variant and enforced as bytes arrive, so a hub that lies about sizes fills no
disk. The budget is the listing's total plus a small slack, and never more than the cap
(`KBUILD_MAX_VARIANT_BYTES`, kbuild.settings); a listing over the cap is refused before anything
is downloaded.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from .errors import VariantTooLarge

# What all of a variant's files together may take beyond their listed sizes (each file has its own
# slack too, in the HTTP reader): enough for a hub's rounding, far too little to matter.
TOTAL_SLACK = 64 * 1024
SETTING = "KBUILD_MAX_VARIANT_BYTES"


class ByteBudget:
    """Bytes one variant download may still write; `take(n)` before writing n bytes."""

    def __init__(self, limit: int, where: str):
        self.limit, self.where, self.used = limit, where, 0
        self._lock = threading.Lock()

    def take(self, count: int) -> None:
        with self._lock:
            self.used += count
            if self.used > self.limit:
                raise VariantTooLarge(f"{self.where}: the hub sent more than this variant's budget of {self.limit} "
                                      f"bytes (its listing's total, at most {SETTING}); download stopped, "
                                      "nothing was cached")


def variant_budget(sizes: Iterable[int], cap: int | None, where: str) -> ByteBudget:
    """The budget for a variant whose listing gives `sizes`; VariantTooLarge, before any byte is
    fetched, when the listing alone is over `cap` (None: no cap)."""
    listed = sum(sizes)
    if cap is not None and listed > cap:
        raise VariantTooLarge(f"{where}: the hub lists {listed} bytes for this variant, more than {SETTING} "
                              f"allows ({cap}); nothing was downloaded (raise {SETTING} if the variant is "
                              "really that large)")
    limit = listed + TOTAL_SLACK
    return ByteBudget(min(limit, cap) if cap is not None else limit, where)
