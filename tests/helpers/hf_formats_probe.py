"""Runs inside a Hugging Face environment (tests/helpers/hf_envs.py): what `kernels` itself makes of
kbuild's variants, for tests/integration/test_hf_loader_formats.py. Prints one JSON line.

    python hf_formats_probe.py load REPO VERSION|REVISION
        kernels.get_kernel from the hub at HF_ENDPOINT, as a user calls it: the organisation's
        trust from the hub (no trust_remote_code), kernels' own validators on (the digest among
        them). Reports the module, the loaded kernel's metadata and what kernels logged, or the
        error it raised.
    python hf_formats_probe.py check VARIANT_DIR
        kernels' metadata parser and digest check on a variant folder (a variant this torch cannot
        import, e.g. a CUDA one on a CPU torch).
    python hf_formats_probe.py pick REPO VERSION
        With a CUDA build of torch on the path (hf_envs.cuda_torch_overlay): the torch kernels sees,
        where kernels and its dependencies come from, kernels' own trace of the repo's variants
        (get_kernel_variants, the backend detected as get_kernel detects it) and the variant
        get_kernel then fetches and imports, with the compiled library that import loaded.
"""

from __future__ import annotations

import json
import logging
import sys
from importlib import metadata
from pathlib import Path

import kernels


class Captured(logging.Handler):
    """Every record kernels logs, at any level (its digest validator reports success at DEBUG)."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record):
        self.lines.append(f"{record.levelname}: {record.getMessage()}")


def load(repo: str, pin: str) -> dict:
    """`pin`: a version number, or a revision (`v1`: a branch, which 0.18+ resolve through
    /api/kernels/{repo}/revision/{ref})."""
    log = Captured()
    root = logging.getLogger("kernels")
    root.setLevel(logging.DEBUG)
    root.addHandler(log)
    how = {"version": int(pin)} if pin.isdigit() else {"revision": pin}
    try:
        module = kernels.get_kernel(repo, backend="cpu", **how)
    except Exception as e:  # what kernels raises is the answer here
        return {"error": f"{type(e).__name__}: {e}", "log": log.lines}
    ran = None
    if hasattr(module, "silu_and_mul"):  # the activation kernel: its op runs, against torch's
        import torch

        x = torch.randn(4, 16)
        ran = (module.silu_and_mul(x) - torch.nn.functional.silu(x[..., :8]) * x[..., 8:]).abs().max().item()
    loaded = [k for k in kernels.get_loaded_kernels() if k.module is module]
    meta = loaded[0].metadata if loaded else None
    return {"module": module.__name__, "file": module.__file__, "names": sorted(n for n in dir(module)
                                                                              if not n.startswith("__")),
            "metadata": {"id": meta.id, "name": str(meta.name), "version": meta.version,
                         "build_layout": str(getattr(meta, "build_layout", None))} if meta else None,
            "max_err": ran, "log": log.lines}


def pick(repo: str, version: str) -> dict:
    import hashlib

    import torch

    log = Captured()
    root = logging.getLogger("kernels")
    root.setLevel(logging.DEBUG)
    root.addHandler(log)
    seen = {"version": torch.__version__, "cuda": torch.version.cuda, "cxx11_abi": torch.compiled_with_cxx11_abi(),
            "gpu": torch.cuda.is_available(), "file": torch.__file__, "installed": metadata.version("torch")}
    origins = {name: sys.modules[name].__file__ for name in ("kernels", "huggingface_hub", "packaging")}
    trace = [{"variant": d.variant.variant_str, "accepted": isinstance(d, kernels.VariantAccepted),
              "reason": getattr(d, "reason", None)} for d in kernels.get_kernel_variants(repo, version=int(version))]
    # check_arch=False: without a GPU kernels skips the arch check anyway; on a GPU host whose
    # capability the build (9.0) lacks it would refuse before the import this is about
    module = kernels.get_kernel(repo, version=int(version), check_arch=False)
    (library,) = [m.__file__ for name, m in sys.modules.items()
                  if name.startswith(module.__name__ + ".") and (getattr(m, "__file__", None) or "").endswith(".so")]
    return {"torch": seen, "origins": origins, "trace": trace, "module": module.__name__, "file": module.__file__,
            "library": library, "library_sha256": hashlib.sha256(Path(library).read_bytes()).hexdigest(),
            "probe": module.probe(), "log": log.lines}


def check(variant_dir: str) -> dict:
    from kernels._internals import digest
    from kernels._rust import Metadata

    folder = Path(variant_dir)
    meta = Metadata.read_from_file(folder / "metadata.json")
    result = digest.verify_digest(folder, metadata=meta, location=None)
    return {"id": meta.id, "name": str(meta.name), "version": meta.version, "digest": type(result).__name__,
            "digest_says": str(result)}


def main(argv: list[str]) -> int:
    commands = {"load": load, "check": check, "pick": pick}
    if not argv or argv[0] not in commands:
        print(f"usage: hf_formats_probe.py {{{'|'.join(commands)}}} ARGS...", file=sys.stderr)
        return 2
    report = commands[argv[0]](*argv[1:])
    report["kernels"] = metadata.version("kernels")
    print("PROBE " + json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
