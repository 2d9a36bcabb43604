"""Runs inside the kernels-0.19 environment (tests/helpers/hf_envs.py): Hugging Face's own variant
choice for explicit systems, for tests/integration/test_variant_choice_parity.py to hold kbuild's
beside. Reads a JSON list of cases on stdin, each {"names": [...], "system": {...}}, and prints one
JSON line: per case the accepted names in kernels' order, the rejected ones with kernels' reason,
and the names kernels does not parse.

    python hf_variant_order.py < cases.json
"""

from __future__ import annotations

import json
import sys
from importlib import metadata

from kernels._internals import backends, variants
from packaging.version import Version

_VERSIONED = {"cuda": backends.CUDA, "rocm": backends.ROCm, "xpu": backends.XPU, "cann": backends.CANN}
_PLAIN = {"cpu": backends.CPU, "metal": backends.Metal, "neuron": backends.Neuron, "tpu": backends.TPU}


def version(pair) -> Version | None:
    return Version(f"{pair[0]}.{pair[1]}") if pair else None


def backend(system: dict):
    name = system["backend"]
    if name in _VERSIONED:
        return _VERSIONED[name](version=version(system["compute_version"]))
    return _PLAIN[name]()


def judge(case: dict) -> dict:
    system = case["system"]
    parsed, invalid = [], []
    for name in case["names"]:  # in the order given: kernels' sort is stable, so ties keep it
        try:
            parsed.append(variants.parse_variant(name))
        except ValueError:
            invalid.append(name)
    _, trace = variants._resolve_variant_for_system(
        variants=parsed,
        selected_backend=backend(system),
        cpu=system["cpu"],
        os=system["os"],
        torch_version=version(system["torch"]),
        # kernels reads the C++ ABI on Linux only
        torch_cxx11_abi=system["cxx11"] if system["os"] == "linux" else None,
        tvm_ffi_version=version(system.get("tvm_ffi")),
        macos_version=version(system.get("macos")),
        python_version=version(system["python"]),
        free_threaded=system["free_threaded"],
        has_mlx=system["mlx"],
    )
    accepted = [d.variant.variant_str for d in trace if isinstance(d, variants.VariantAccepted)]
    rejected = {d.variant.variant_str: d.reason for d in trace if isinstance(d, variants.VariantRejected)}
    return {"accepted": accepted, "rejected": rejected, "invalid": invalid}


def main() -> int:
    cases = json.load(sys.stdin)
    print(json.dumps({"kernels": metadata.version("kernels"), "cases": [judge(case) for case in cases]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
