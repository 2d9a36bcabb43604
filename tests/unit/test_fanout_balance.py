"""Fan-out slices balance the estimated compile cost; a CUDA variant costs more with more archs."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.plan.matrix import select
from builder.plan.slices import Slice, costs, plan_slices
from builder.project.manifest import load_manifest

REPO = Path(__file__).resolve().parents[2]


def test_slices_balance_the_estimated_cost():
    per_variant = {"big": {"a": 40.0}, "mid": {"a": 15.0, "b": 10.0}, "small": {"b": 9.0}, "tiny": {"c": 0.1}}
    slices = plan_slices(per_variant, 2)
    assert slices == [Slice(("big",), 40.0, ("a",)), Slice(("mid", "small", "tiny"), 34.1, ("a", "b", "c"))]
    assert len(plan_slices(per_variant, 9)) == 4  # never an empty slice
    with pytest.raises(ValueError):
        plan_slices(per_variant, 0)


def test_a_cuda_variant_costs_more_with_more_archs(tmp_path):
    kernels = [load_manifest(REPO / "kernels" / "rmsnorm")]
    many = costs(kernels, select({"torch": ["2.14"], "cuda": ["13.0"]}))
    assert many["torch214-cxx11-cu130-x86_64-linux"]["rmsnorm"] > 4 * many["torch214-cxx11-cpu-x86_64-linux"]["rmsnorm"]
