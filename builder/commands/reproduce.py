"""`kbuild reproduce ORG/NAME@vN`: rebuild a published variant from the commit and toolchain its
metadata.json records, in a fresh folder, and compare every file with the hub's copy
(builder/verify/reproduce.py); exit 0 only when every file is the same.

    kbuild reproduce kbuild/activation@v1 --source ~/src/kernels
    kbuild reproduce kbuild/activation@v1 --variant torch214-cxx11-cu130-x86_64-linux --json
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from builder.commands.arguments import add_hub, add_python, open_store, python
from kbuild_common.errors import ExitCode

if TYPE_CHECKING:
    from builder.report import Reporter


def add_parser(sub) -> None:
    p = sub.add_parser("reproduce", help="rebuild a published variant from its recorded sources and toolchain, "
                                         "and compare it with the hub's copy file by file")
    p.add_argument("request", metavar="ORG/NAME@vN", help="the published kernel (a version branch or a revision)")
    p.add_argument("--variant", default=None, metavar="NAME",
                   help="the variant to rebuild (default: the one kbuild's loader picks for this machine)")
    p.add_argument("--source", default=None, metavar="PATH_OR_GIT_URL",
                   help="the kernel's git repository (default: the repository of the working folder)")
    add_hub(p)
    add_python(p)
    p.add_argument("--keep", action="store_true", help="keep the rebuilt variant folder (its path is printed)")
    p.add_argument("--json", action="store_true", help="print a machine-readable record")
    p.set_defaults(handler=run)


def run(args, reporter: Reporter) -> int:
    from builder.config.environment import from_environment
    from builder.verify.reproduce import reproduce

    env = from_environment()
    hub = env.hub_setting(args.hub).value  # --hub through the one cascade (None: the default local hub)
    result = reproduce(args.request, hub=hub, variant=args.variant, source=args.source, python=python(args),
                       store=open_store(reporter.info), cuda_home=env.cuda_home, cxx=env.cxx,
                       probe_dir=env.probe_dir, reporter=reporter, keep=args.keep)
    if args.json:
        reporter.result(json.dumps(result.as_json(), indent=2))
    else:
        for line in _lines(result):
            reporter.result(line)
    return ExitCode.OK if result.identical else ExitCode.FAILED


def _lines(result) -> list[str]:
    r = result.recorded
    lines = [f"{result.request} {r.variant}: rebuilt from commit {r.commit[:12]} "
             f"(folder {result.kernel_folder}, tree {r.tree[:12]})"]
    lines += [f"  note: {note}" for note in result.notes]
    width = max(len(f.state) for f in result.files)
    lines += [f"  {f.state:<{width}}  {f.path}" for f in result.files]
    counts = {state: sum(f.state == state for f in result.files) for state in ("same", "differs", "missing", "extra")}
    if result.identical:
        lines.append(f"identical: all {counts['same']} files are the same")
    else:
        lines.append("NOT identical: " + ", ".join(f"{n} {state}" for state, n in counts.items() if n))
    if result.kept:
        lines.append(f"rebuilt variant kept at {result.kept}")
    return lines
