"""What kbuild's loader decides for a built kernel on this machine's real GPU, and for GPUs of
other compute capabilities (faked, as KBUILD_GPU_ARCH would): run on a GPU host against a
project, its build/ folder or one variant folder.

    .venv/bin/python bench/gpu/arch_check.py kernels/activation            # + 8.0 8.6 9.0 10.0 12.0
    .venv/bin/python bench/gpu/arch_check.py build/torch214-cxx11-cu130-x86_64-linux --as 8.9 --import

Prints the real probe (torch.cuda.get_device_capability of the current device), each variant's
recorded archs, and the trace of every judged capability; with --import, imports the variant
chosen for the real GPU (proof that the accepted one loads). --json FILE writes the decisions.
Exit status 0 unless the path holds no variants.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from kbuild.choice import format_trace
from kbuild.loading import judge_folder, load_variant
from kbuild.metadata import VariantMetadata
from kbuild.variants import detect_system, parse_variant

DEFAULT_OTHERS = ("8.0", "8.6", "9.0", "10.0", "12.0")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path, help="a kernel project, its build/ folder, or one variant folder")
    parser.add_argument("--as", dest="others", nargs="+", default=list(DEFAULT_OTHERS), metavar="X.Y",
                        help=f"other compute capabilities to judge for (default: {' '.join(DEFAULT_OTHERS)})")
    parser.add_argument("--import", dest="do_import", action="store_true",
                        help="import the variant chosen for the real GPU")
    parser.add_argument("--json", type=Path, default=None, help="write the decisions here")
    args = parser.parse_args()

    import torch

    build, only = folders(args.path.resolve())
    if not build.is_dir():
        print(f"arch_check: {args.path}: not a folder", file=sys.stderr)
        return 1
    system = detect_system()
    print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, available: {torch.cuda.is_available()}")
    if torch.cuda.is_available():
        print(f"device: {torch.cuda.get_device_name()} (probe: compute capability {system.gpu_arch})")
    print(f"this system: {system.describe()}")
    for name in sorted(d.name for d in build.iterdir() if d.is_dir() and (only is None or d.name == only)):
        meta = VariantMetadata.for_variant(build / name)
        archs = ", ".join(meta.backend.archs) if meta.backend and meta.backend.archs else "none recorded"
        print(f"  {name}: archs {archs}")

    decisions: dict[str, dict[str, Any]] = {}  # label: gpu_arch, chosen, trace (and imported)
    for label, judged in [("real", system)] + [(f"as {cap}", replace(system, gpu_arch=cap, device_visible=True))
                                                for cap in args.others]:
        trace = [c for c in judge_folder(build, judged) if only is None or c.name == only]
        chosen = trace[0].name if trace and trace[0].accepted else None
        decisions[label] = {"gpu_arch": judged.gpu_arch, "chosen": chosen,
                            "trace": [{"variant": c.name, "fits": c.accepted, "why": c.reason or c.note}
                                      for c in trace]}
        print(f"\n== {label} (gpu_arch {judged.gpu_arch}): loads {chosen or 'nothing'}")
        print(format_trace(trace))

    if args.do_import:
        chosen = decisions["real"]["chosen"]
        if chosen is None:
            print("\n--import: nothing fits the real GPU, nothing imported")
        else:
            module = load_variant(build / chosen)
            print(f"\n--import: {chosen} imported as {module.__name__} from {module.__file__}")
            decisions["real"]["imported"] = module.__name__
    if args.json:
        args.json.write_text(json.dumps({"system": system.describe(), "decisions": decisions}, indent=2) + "\n")
    return 0


def folders(path: Path) -> tuple[Path, str | None]:
    """(the folder holding variant folders, the one variant to judge or None for all)."""
    if (path / "build").is_dir():
        return path / "build", None
    try:
        parse_variant(path.name)
    except ValueError:
        return path, None
    return path.parent, path.name


if __name__ == "__main__":
    sys.exit(main())
