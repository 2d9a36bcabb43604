"""`kbuild check-layers [DIR | ORG/NAME@REV]`: does each layer of a kernel compute what the transformers
layer it replaces computes, forward and backward (docs/checking-layers.md)? A table of relative errors,
one line per quantity that differs, and why (the custom op autograd cannot see, opcheck's tests)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from builder.commands.arguments import add_kernel_target, add_python, folder, published, python
from builder.config.environment import from_environment as builder_settings
from kbuild_common.errors import ExitCode, UsageError

if TYPE_CHECKING:
    from builder.report import Reporter

# the choices builder/verify/layer_check.py has tolerances and modes for (kept here: --help imports nothing)
DTYPES = ("bfloat16", "float16", "float32", "float64")
MODES = ("both", "inference", "training")


def add_parser(sub) -> None:
    p = sub.add_parser("check-layers", help="compare a kernel's layers with the transformers layers they replace, "
                                            "forward and backward")
    add_kernel_target(p, "a kernel folder (its built variants; default: .), or a published kernel: the variant "
                         "get_kernel would load for the torch of --python, from --hub", "layers")
    p.add_argument("--variant", action="append", default=[], metavar="V",
                   help="only this built variant, even one the loader would not pick here (repeatable)")
    p.add_argument("--map", action="append", default=[], metavar="LAYER=KERNEL_LAYER",
                   help="the transformers layer a kernel layer replaces (RMSNorm=LigerRMSNorm, "
                        "rotary_pos_emb=apply_rotary_transformers; repeatable; default: the kernel's build.toml "
                        "[general.check-layers] map, else what the installed transformers maps to its repo id)")
    p.add_argument("--model", default=None, metavar="ARCH",
                   help="the transformers model type of the tiny random model the layers go into (default: the "
                        "kernel's build.toml [general.check-layers] model, else llama: RMSNorm, SiLU, rotary_pos_emb)")
    p.add_argument("--mode", choices=MODES, default="both",
                   help="inference: forward only; training: forward and backward; both (default)")
    p.add_argument("--dtype", action="append", default=[], choices=DTYPES, metavar="DTYPE",
                   help=f"{', '.join(DTYPES)} (repeatable; default float32, and bfloat16 on a GPU)")
    p.add_argument("--json", type=Path, default=None, metavar="F", help="write every row and diagnosis to F")
    add_python(p)
    p.set_defaults(handler=run)


def run(args, reporter: Reporter) -> int:
    from builder.verify.layer_check import CheckRequest, check_folder, check_published

    settings = builder_settings()
    request = CheckRequest(tuple(args.map), args.model, args.mode, tuple(dict.fromkeys(args.dtype)))
    if not published(args.target):
        checks = check_folder(folder(Path(args.target)).resolve(), tuple(args.variant), python(args), request,
                              reporter, settings)
    else:
        if args.variant:
            raise UsageError("--variant is for a kernel folder; ORG/NAME@REV checks the variant get_kernel picks")
        checks = [check_published(args.target, settings.hub_setting(args.hub).value, reporter, request,
                                  python(args), trust_remote_code=args.trust_remote_code)]
    ran = [c for c in checks if c.report]
    for c in ran:
        _render(c, reporter)
    for c in checks:
        if c.skipped:
            reporter.info(f"left out  {c.kernel}/{c.variant}: {c.skipped}")
    if args.json:
        args.json.write_text(json.dumps([c.to_json() for c in checks], indent=1))
        reporter.info(f"wrote {args.json}")
    if not ran:
        reporter.error("no variant was checked: every one was left out",
                       hint="--variant V for one the loader would not pick here")
        return ExitCode.FAILED
    return ExitCode.FAILED if any(c.failures for c in ran) else ExitCode.OK


def _render(check, reporter: Reporter) -> None:
    report = check.report
    tolerance = ", ".join(f"{d} {t['layer']:g} a layer, {t['model']:g} the model"
                          for d, t in report["tolerance"].items())
    reporter.info(f"{check.kernel}/{check.variant} {check.where}: torch {report['torch']}, transformers "
                  f"{report['transformers']}, a tiny random {report['model']} model"
                  + (f", {report['gpu']}" if report.get("gpu") else ""))
    for layer in report["layers"]:
        source = next((m.source for m in check.maps if m.layer == layer["layer"]), "--map")
        reporter.info(f"  {layer['layer']} <- layers.{layer['kernel_layer']} ({layer['kind']} layer, {source}; "
                      f"replaces {', '.join(layer['replaces'])})")
    # the kernel layer of each row is in the lines above: the table keeps to 80 columns
    rows = [[r["layer"], f"{r['dtype']} {r['mode']}", f"{r['part']}: {r['quantity']}", _rel(r),
             "ok" if r["ok"] else "DIFFERS"] for r in report["rows"]]
    reporter.table(f"kbuild check-layers: relative error against transformers (allowed: {tolerance})",
                   ["layer", "run", "quantity", "rel. error", "check"], rows, right=(3,))
    for note in dict.fromkeys(report.get("notes", [])):  # once, whatever the dtypes
        reporter.info(note)
    if any(r.get("why") == "missing" for r in report["rows"]):
        reporter.info("missing: one side gives no tensor there (no gradient, say), or one of another shape")
    model: dict[tuple[str, str], list[dict]] = {}
    for r in check.failures:
        if r["layer"] == "model":  # the model's rows follow from the layers': one line for them
            model.setdefault((r["dtype"], r["mode"]), []).append(r)
            continue
        reporter.error(f"{check.kernel}/{check.variant}: {r['layer']} ({r['kernel_layer']}), {r['dtype']}, "
                       f"{r['mode']}: "
                       f"{r['part']}: {r['quantity']} differs, rel {_rel(r)}")
    for (dtype, mode), failed in model.items():
        raised = [r["quantity"] for r in failed if r.get("why") == "raised"]
        said = raised[0] if raised else (f"{', '.join(r['quantity'] for r in failed[:3])}"
                                         f"{' and more' if len(failed) > 3 else ''} differ")
        reporter.error(f"{check.kernel}/{check.variant}: the whole model, {dtype}, {mode}: {said}")
    said = set()
    for key, found in report.get("diagnosis", {}).items():
        layer = key.split("/")[0]
        if layer in said:  # the ops a layer calls, once, whatever the dtypes
            continue
        said.add(layer)
        if not found["custom_ops"]:
            reporter.info(f"{layer}: calls no custom op: autograd records every op it runs")
        wrong = any(r["layer"] == layer and r["part"] == "backward" for r in check.failures)
        for op in found["custom_ops"]:
            if wrong:  # why the gradient differs; a right one may well call ops with no formula of their own
                reporter.info(f"{layer}: {op}: autograd: {found['autograd'].get(op, '?')}")
            tests = found["opcheck"].get(op, {})
            verdicts = ", ".join(f"{t.removeprefix('test_')} {'pass' if v == 'pass' else 'FAIL'}"
                                 for t, v in tests.items())
            reporter.info(f"{layer}: {op}: opcheck: {verdicts}")
            for t, v in tests.items():
                if v != "pass":
                    reporter.info(f"    {t}: {v}")
        for warning in found.get("autograd_warnings", []):
            reporter.info(f"{layer}: autograd warned: {warning}")


def _rel(row: dict) -> str:
    # no figure: NaN in the kernel's tensor, or a gradient or output one side lacks (or of another shape)
    return row.get("why") or "missing" if row["rel"] is None else f"{row['rel']:.2g}"
