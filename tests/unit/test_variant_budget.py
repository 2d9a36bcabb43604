"""A variant download's size budget (kbuild.budget): the listing's total plus one slack for all of
its files together, never more than the cap, shared by parallel downloads; a listing over the cap
is refused before a byte is fetched."""

from __future__ import annotations

import threading

import pytest

from kbuild.budget import TOTAL_SLACK, ByteBudget, variant_budget
from kbuild.errors import OversizedDownload, VariantTooLarge


def test_the_budget_is_the_listing_plus_one_slack_capped():
    assert variant_budget([100, 200], None, "v").limit == 300 + TOTAL_SLACK
    assert variant_budget([100, 200], 1000, "v").limit == 1000
    with pytest.raises(VariantTooLarge, match=r"^org/x build/v: the hub lists 301 bytes for this variant, more than "
                                              r"KBUILD_MAX_VARIANT_BYTES allows \(300\); nothing was downloaded"):
        variant_budget([100, 201], 300, "org/x build/v")
    assert issubclass(VariantTooLarge, OversizedDownload) and issubclass(VariantTooLarge, OSError)


def test_parallel_downloads_share_one_budget():
    """Eight files that each stay under their own slack still pass the variant's budget together."""
    budget = ByteBudget(8 * 1000, "org/x build/v")
    taken, stopped, lock = [], [], threading.Lock()

    def download():
        try:
            for _ in range(2):  # 2000 bytes a file, under any per-file slack: 16000 together
                budget.take(1000)
                with lock:
                    taken.append(1000)
        except VariantTooLarge as e:
            stopped.append(e)

    threads = [threading.Thread(target=download) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(taken) == 8000 and stopped  # exactly the budget was written, then every download stopped
    assert "the hub sent more than this variant's budget of 8000 bytes" in str(stopped[0])
