"""Edition 6 (kernel-builder 0.18+, kernels-data's v6, as kernels 0.19.1's parser reads it):

- a kernel section names the language it is written in, `language = "cpp-cuda"`, where edition 5
  named its backend; `backend` is refused;
- `[general] build-layout = "files" | "zip"` ("zip": the variant's Python files in `<id>.zip`);
- `[torch-noarch]` spells its keys `cuda_capabilities` and `rocm_archs` (the parser's spelling;
  kernel-builder's documentation writes them with dashes, which the parser refuses);
- `version` and `license` are required, as in every variant's metadata.json;
- Rust kernels (`rust-cpu`, `rust-cuda-oxide`, `rust-cutile`, built through [tvm-ffi]) and MLX
  kernels ([mlx-noarch]) are known and refused: kbuild does not build them.

Everything else reads as edition 5.
"""

from __future__ import annotations

from builder.backends import COMPILED_BACKENDS
from builder.project.editions.reader import GENERAL, Reader

# cpp-<backend>: a C++ (or CUDA, HIP, Metal, SYCL) section of that backend
LANGUAGES = {f"cpp-{b}": b for b in ("cpu", "cuda", "rocm", "metal", "xpu")}
RUST = ("rust-cpu", "rust-cuda-oxide", "rust-cutile")
LAYOUTS = ("files", "zip")

_BUILT = " and ".join(f'language = "cpp-{b}"' for b in COMPILED_BACKENDS)
WHAT_KBUILD_BUILDS = (f"kbuild builds {_BUILT} "
                      "sections of a [torch] kernel (the other cpp-* sections are read, not compiled) and "
                      "[torch-noarch] (Python/Triton) kernels")


class Edition6(Reader):
    EDITION = 6
    GENERAL = {**GENERAL, "build-layout": "str"}
    REQUIRED = ("name", "version", "license", "backends")
    RETIRED = {("general", "universal"): "edition 6 has no `universal`; use a [torch-noarch] table"}
    TOP = ("general", "torch", "torch-noarch", "tvm-ffi", "mlx-noarch", "kernel")
    NOARCH = {"pyext": "strs", "cuda_capabilities": "strs", "rocm_archs": "strs"}
    NOARCH_CAPABILITIES, NOARCH_ROCM = ("cuda_capabilities",), ("rocm_archs",)
    SELECTOR = "language"
    RETIRED_KERNEL_KEYS = {"backend": "edition 5's key; edition 6 names a kernel's language only (language = "
                                      "\"cpp-…\" says its backend): drop it"}

    def kernel_backend(self, keys: tuple[str, ...], value) -> str:
        self._type(keys, value, "str")
        if value in RUST:
            raise self.w.error(keys, f'"{value}" is a Rust kernel, which kbuild does not build: {WHAT_KBUILD_BUILDS}')
        if value not in LANGUAGES:
            raise self.w.error(keys, f'unknown language "{value}" (known: {", ".join((*LANGUAGES, *RUST))})')
        return LANGUAGES[value]

    def kind(self, backend: str) -> str:
        return f"language cpp-{backend}"

    def framework_refusals(self) -> bool:
        refused = False
        if "mlx-noarch" in self.data:
            self._fail(("mlx-noarch",),
                       f"MLX kernels (Apple's mlx on Metal) are not built by kbuild: {WHAT_KBUILD_BUILDS}")
            refused = True
        if "tvm-ffi" in self.data and not self._rust_kernels():  # a Rust kernel's refusal says it already
            self._fail(("tvm-ffi",), "tvm-ffi kernels are not supported by kbuild yet (use [torch] or [torch-noarch])")
            refused = True
        return refused or "tvm-ffi" in self.data

    def _rust_kernels(self) -> bool:
        kernels = self.data.get("kernel")
        return isinstance(kernels, dict) and any(
            isinstance(body, dict) and body.get("language") in RUST for body in kernels.values())

    def _build_layout(self, general: dict) -> str:
        layout = general.get("build-layout", "files")
        if layout not in LAYOUTS:
            raise self.w.error(("general", "build-layout"), f'expected "files" or "zip", got "{layout}"')
        return layout

    def _missing_selector(self, keys, body: dict) -> None:
        if "backend" in body:  # an edition 5 section in an edition 6 file: say what to write instead
            language = f'cpp-{body["backend"]}' if f'cpp-{body["backend"]}' in LANGUAGES else "cpp-<backend>"
            self._fail(keys + ("backend",), f'edition 6 names a kernel\'s language instead: language = "{language}" '
                       "(`kbuild update-build` rewrites an edition 5 file)")
            return
        super()._missing_selector(keys, body)

    def missing_selector_message(self) -> str:
        return f"missing required key (one of {', '.join(LANGUAGES)})"
