"""What kernel-builder's source layout lets a project include, built for real: flash-attn3's
binding lives in flash-attn/ and includes "../torch-ext/registration.h", the file kernel-builder
writes beside the sources. kbuild writes it into .kbuild/ (never into the project's tree) where
that relative path resolves through its include folder. The variant loads and its op runs."""

from __future__ import annotations

import pytest

from builder.commands.main import main
from kbuild.loading import load_variant

torch = pytest.importorskip("torch")

BUILD_TOML = """[general]
name = "relpath"
version = 1
edition = 5
license = "Apache-2.0"
backends = ["cpu"]

[torch]
src = ["flash-attn/api.cpp"]
"""
API = """#include <torch/library.h>
#include <ATen/core/Tensor.h>

at::Tensor twice(const at::Tensor& x) { return x.mul(2); }

#include "../torch-ext/registration.h"

TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
  ops.def("twice(Tensor x) -> Tensor");
  ops.impl("twice", c10::kCPU, &twice);
}

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
"""
INIT = """import torch

from ._ops import ops


def twice(x: torch.Tensor) -> torch.Tensor:
    return ops.twice(x)
"""


def test_a_binding_that_includes_registration_h_by_kernel_builders_relative_path(tmp_path):
    kernel = tmp_path / "relpath"
    for rel, text in {"build.toml": BUILD_TOML, "flash-attn/api.cpp": API,
                      "torch-ext/relpath/__init__.py": INIT}.items():
        (kernel / rel).parent.mkdir(parents=True, exist_ok=True)
        (kernel / rel).write_text(text)
    assert main(["build", str(kernel), "--no-cache"]) == 0
    assert not (kernel / "torch-ext" / "registration.h").exists()  # the project's tree is left as it was
    (variant,) = [p for p in (kernel / "build").iterdir() if p.is_dir()]
    module = load_variant(variant)
    assert module.twice(torch.ones(3)).tolist() == [2.0, 2.0, 2.0]
