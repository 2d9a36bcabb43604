"""Load a built first-party kernel with kbuild's runtime and check one op against torch.

    python examples/load_local.py kernels/activation [--backend cpu]
"""

import argparse
import sys
from pathlib import Path

import torch

from kbuild import get_local_kernel

CHECKS = {
    "activation": lambda k, x: (k.silu_and_mul(x), torch.nn.functional.silu(x[..., :64]) * x[..., 64:]),
    "rmsnorm": lambda k, x: (
        k.rms_norm(x, torch.ones(128, dtype=x.dtype, device=x.device), 1e-6),
        torch.nn.functional.rms_norm(x, (128,), eps=1e-6),
    ),
}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("kernel", type=Path)
    parser.add_argument("--backend", default=None, help="e.g. cpu, to pick the CPU build in a CUDA torch")
    args = parser.parse_args()
    # Without a GPU, a CUDA torch can still run the CPU build.
    backend = args.backend or (None if torch.cuda.is_available() else "cpu")
    kernel = get_local_kernel(args.kernel, backend=backend)
    print(f"loaded {kernel.__name__} from {Path(kernel.__file__).parent}")
    print(f"public API: {', '.join(getattr(kernel, '__all__', []))}")
    check = CHECKS.get(args.kernel.resolve().name)
    if check is None:
        return 0
    device = "cpu" if backend == "cpu" else "cuda"
    x = torch.randn(4, 128, device=device)
    got, want = check(kernel, x)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    print(f"{args.kernel.name}: op output matches torch on {device} (max |diff| {(got - want).abs().max().item():.2e})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
