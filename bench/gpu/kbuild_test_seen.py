"""A pytest plugin for bench/gpu/kbuild_test_truth.sh (`kbuild test K -- -p kbuild_test_seen`): what
the suite's own process saw of the machine, written before its first test as
$SEEN_DIR/<kernel>__<variant>.json. The kernels' suites stay unchanged; this only watches."""

import json
import os
from pathlib import Path

WATCHED = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ZE_AFFINITY_MASK", "ONEAPI_DEVICE_SELECTOR",
           "KBUILD_TEST_DEVICE", "KBUILD_TEST_GPU_HIDDEN", "TRITON_INTERPRET")


def pytest_sessionstart(session):
    out = os.environ.get("SEEN_DIR")
    package, folder = os.environ.get("KBUILD_TEST_PACKAGE"), os.environ.get("KBUILD_TEST_PACKAGE_DIR")
    if not (out and package and folder):
        return
    import torch

    variant = Path(os.path.realpath(os.path.join(folder, package)))  # the link kbuild made: the variant folder
    count = torch.cuda.device_count()
    record: dict[str, object] = {name: os.environ.get(name) for name in WATCHED}
    record.update(kernel=variant.parent.parent.name, variant=variant.name, cuda_device_count=count,
                  cuda_available=torch.cuda.is_available(),
                  gpu=torch.cuda.get_device_name(0) if count and torch.cuda.is_available() else None)
    Path(out, f"{record['kernel']}__{variant.name}.json").write_text(json.dumps(record))
