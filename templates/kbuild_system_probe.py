"""kbuild's probe for `kbuild test`, run in the Python whose torch runs the suites: that torch and
machine as kbuild's loader sees them (kbuild.variants.detect_system), as one JSON object on stdout.

argv[1]: a folder holding the `kbuild` package (searched first: the builder's own copy);
argv[2]: a folder holding `packaging` (searched last: the environment's own copy wins).
"""

import dataclasses
import json
import sys

sys.path.insert(0, sys.argv[1])
sys.path.append(sys.argv[2])

import torch  # noqa: E402

from kbuild.variants import detect_system  # noqa: E402

system = detect_system()
print(json.dumps({"system": dataclasses.asdict(system), "torch_version": torch.__version__, "prefix": sys.prefix}))
