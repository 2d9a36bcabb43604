"""`kbuild verify ORG/NAME@vN`: each published variant and who signed it (builder/verify/signatures.py);
exit 1 when a variant's files fail their digest, or when the organisation's require-signature rule
(or --require) finds a variant no trusted signer signed.

    kbuild verify kbuild/activation@v1
    kbuild verify kbuild/activation@v1 --variant torch-stable-abi210-cpu-x86_64-linux --json
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from builder.commands.arguments import add_hub
from kbuild_common.errors import ExitCode, KbuildError

if TYPE_CHECKING:
    from builder.report import Reporter


def add_parser(sub) -> None:
    p = sub.add_parser("verify", help="who signed each variant of a published kernel (exit 1 when a "
                                      "require-signature rule fails)")
    p.add_argument("request", metavar="ORG/NAME@vN", help="the published kernel (a version branch or a revision)")
    add_hub(p)
    p.add_argument("--variant", default=None, metavar="NAME", help="only this variant (default: every variant)")
    p.add_argument("--require", action="store_true",
                   help="fail unless every variant is signed by a trusted signer, whatever the settings' rule")
    p.add_argument("--json", action="store_true", help="print a machine-readable record")
    p.set_defaults(handler=run)


def run(args, reporter: Reporter) -> int:
    from builder.config.environment import from_environment
    from builder.verify.signatures import verify_signatures
    from kbuild.errors import KernelError

    hub = from_environment().hub_setting(args.hub).value  # --hub through the one cascade
    try:
        report = verify_signatures(args.request, hub, args.variant, True if args.require else None)
    except KernelError as e:  # the runtime's errors (no such repo, revision, hub, a bad setting) as one line
        raise KbuildError(f"{args.request}: {str(e).splitlines()[0]}") from None
    if args.json:
        reporter.result(json.dumps(report.as_json(), indent=2))
    else:
        reporter.result(f"{report.repo_id}@{report.revision} (commit {report.commit[:12]}, {report.hub}): "
                        f"{report.rule}; trusted signers: {report.signers}")
        width = max((len(r.variant) for r in report.rows), default=0)
        for r in report.rows:
            said = f"signed by {r.signer}" if r.signer else "unsigned"
            if r.refused:
                said = f"REFUSED ({said}): {r.refused}" if r.signer else f"REFUSED: {r.refused}"
            reporter.result(f"  {r.variant:<{width}}  {said}")
        tampered = not all(r.refused is None or r.signer for r in report.rows)
        reporter.result("ok" if report.ok else "FAILED: " + ("a variant's files do not match its digest" if tampered
                                                             else f"{report.rule} refuses a variant"))
    return ExitCode.OK if report.ok else ExitCode.FAILED
