"""What the pre-staging checks of issue 36 cost on one linked library: the undefined-symbol check
(builder/stage/link_check.py) and the import in the torch that built it (builder/stage/load_check.py),
each timed whole, against the link step's own time when given. Prints one JSON line.

    python bench/gpu/check_cost.py .kbuild/<variant>/<ops_name>.so [PYTHON]
"""

import json
import sys
import time
from pathlib import Path

import torch  # noqa: TID253 - its lib/ folder is where the library's torch symbols resolve

from builder.stage import load_errors, unresolved_symbols
from builder.toolchains import for_os
from kbuild.variants import host_os

library = Path(sys.argv[1])
python = sys.argv[2] if len(sys.argv) > 2 else sys.executable
torch_lib = str(Path(torch.__file__).parent / "lib")
binary = for_os(host_os())  # the format of this machine's libraries (ELF on Linux)
t0 = time.perf_counter()
check = unresolved_symbols(library, binary, [torch_lib])
t1 = time.perf_counter()
errors = load_errors(python, {library: library.stem})
t2 = time.perf_counter()
print(json.dumps({"library": library.name, "size_mb": round(library.stat().st_size / 1e6, 1),
                  "undefined_symbols": len(binary.library(library).undefined), "unresolved": len(check.undefined),
                  "link_check_s": round(t1 - t0, 2), "import_check_s": round(t2 - t1, 2),
                  "import_errors": {str(k): v for k, v in errors.items()}}))
