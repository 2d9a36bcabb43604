"""Load a first-party kernel with kbuild's runtime and check one op against torch.

    python examples/load_kernel.py kbuild/activation@v1      # from a hub (default: the local hub)
    python examples/load_kernel.py kernels/activation        # from a build folder

activation is built against torch's stable ABI, so the same variant
(torch-stable-abi210-cpu-x86_64-linux, …-cu130-…) loads in any torch >= 2.10; rmsnorm's variants
are per torch (torch214-cxx11-…). The loader picks whichever fits the running torch.
"""

import argparse
import sys
from pathlib import Path

import torch

from kbuild import get_kernel, get_local_kernel

CHECKS = {
    "activation": lambda k, x: (k.silu_and_mul(x), torch.nn.functional.silu(x[..., :64]) * x[..., 64:]),
    "rmsnorm": lambda k, x: (
        k.rms_norm(x, torch.ones(128, dtype=x.dtype, device=x.device), 1e-6),
        torch.nn.functional.rms_norm(x, (128,), eps=1e-6),
    ),
}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("kernel", help="ORG/NAME@REV on a hub, or a kernel folder with build/")
    parser.add_argument("--backend", default=None, help="e.g. cpu, to pick the CPU build in a CUDA torch")
    args = parser.parse_args()
    # Without a GPU, a CUDA torch can still run the CPU build.
    backend = args.backend or (None if torch.cuda.is_available() else "cpu")
    if Path(args.kernel).is_dir():
        kernel = get_local_kernel(Path(args.kernel), backend=backend)
    else:
        kernel = get_kernel(args.kernel, backend=backend)
    print(f"loaded {kernel.__name__} from {Path(kernel.__file__).parent}")
    print(f"public API: {', '.join(getattr(kernel, '__all__', []))}")
    name = Path(args.kernel.split("@")[0]).name
    check = CHECKS.get(name)
    if check is None:
        return 0
    device = "cpu" if backend == "cpu" else "cuda"
    x = torch.randn(4, 128, device=device)
    got, want = check(kernel, x)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    print(f"{name}: op output matches torch on {device} (max |diff| {(got - want).abs().max().item():.2e})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
