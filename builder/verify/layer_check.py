"""`kbuild check-layers`: does a kernel's layer compute what the transformers layer it replaces computes,
forward and backward? (docs/checking-layers.md)

Which kernel layer replaces which transformers layer comes from `--map LAYER=KERNEL_LAYER`, else from the
installed transformers' own default mapping for the kernel's repo id (transformers_kernels.py). Each built
variant that can run here (chosen as `kbuild test` chooses them, variant_choice.py), or the published
variant get_kernel would load here, is checked by the runner (builder/templates/kbuild_layer_check_runner.py)
inside the Python that runs transformers: a tiny random model with and without the kernel's layers bound,
and each bound layer's captured inputs replayed alone against the original code.
"""

from __future__ import annotations

import hashlib
import json
import re
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

from builder import resources
from builder.config.environment import BuilderSettings
from builder.hub.transformers_kernels import read
from builder.layout import BUILD_DIR, LAYER_CHECK, WORK_DIR
from builder.project.manifest import load_manifest
from builder.project.model import LAYER_MAP
from builder.project.workspace import kernel_dirs
from builder.verify.variant_choice import (
    built_variants,
    check_named,
    choose,
    gpu_visible,
    import_variant_from,
    place,
    probe_once,
)
from kbuild.choice import format_trace
from kbuild.errors import KernelError
from kbuild.hub_loader import install_kernel, resolve_kernel
from kbuild.hubs import parse_hub_address
from kbuild.metadata import VariantMetadata
from kbuild.refs import parse_request
from kbuild.repo_layout import variant_folder
from kbuild.settings import from_environment
from kbuild.trust import check_trust
from kbuild_common import proc
from kbuild_common.errors import UsageError

_RUNNER = "kbuild_layer_check_runner"  # builder/templates/kbuild_layer_check_runner.py
TIMEOUT_S = 1800  # one variant's check: two tiny models, a few replays

# relative error ||kernel - original|| / ||original|| allowed: a layer alone, and the whole model (errors
# add up over its layers). fp32 kernels reorder sums; half precision rounds each element (2^-8, 2^-11).
TOLERANCES = {"float32": (1e-4, 1e-3), "float64": (1e-8, 1e-7), "bfloat16": (3e-2, 6e-2), "float16": (5e-3, 2e-2)}
MODES = {"inference": ("inference",), "training": ("training",), "both": ("inference", "training")}


@dataclass(frozen=True)
class LayerMap:
    layer: str  # transformers' name for what it replaces: "RMSNorm", "rotary_pos_emb"
    kernel_layer: str  # the kernel's layers.<name>
    modes: tuple[str, ...] = ("inference", "training")  # what it is bound for
    source: str = "--map"

    def spec(self) -> dict:
        # a map someone wrote must hold; one of transformers' may name a layer the model has not (a GELU in a Llama)
        return {"layer": self.layer, "kernel_layer": self.kernel_layer, "modes": list(self.modes),
                "required": not self.source.startswith("transformers")}


@dataclass
class VariantCheck:
    """One variant's check: the runner's report, or why it did not run."""

    kernel: str
    variant: str
    where: str = ""
    maps: list[LayerMap] = field(default_factory=list)
    report: dict = field(default_factory=dict)
    skipped: str = ""

    @property
    def failures(self) -> list[dict]:
        return [r for r in self.report.get("rows", []) if not r["ok"]]

    def verdict(self) -> dict[str, bool | None]:
        """{"forward": all forward rows agree, "backward": all backward rows agree (None: none was checked)}."""
        def part(name):
            rows = [r["ok"] for r in self.report.get("rows", []) if r["part"] == name]
            return all(rows) if rows else None
        return {"forward": part("forward"), "backward": part("backward")}

    def to_json(self) -> dict:
        return {"kernel": self.kernel, "variant": self.variant, "where": self.where, "skipped": self.skipped,
                "maps": [{**m.spec(), "source": m.source} for m in self.maps], **self.report}


class LayersUnavailable(UsageError):
    """The Python asked to run the check cannot (it has no transformers)."""


@dataclass(frozen=True)
class CheckRequest:
    """What to check, as the command's arguments say it."""

    maps: tuple[str, ...] = ()  # --map LAYER=KERNEL_LAYER
    model: str | None = None  # None: the kernel's [general.check-layers] model, else llama
    mode: str = "both"
    dtypes: tuple[str, ...] = ()  # () : float32, and bfloat16 on a GPU


CONFIG = "build.toml [general.check-layers]"


def parse_maps(texts: tuple[str, ...], source: str = "--map") -> list[LayerMap]:
    maps: list[LayerMap] = []
    for text in texts:
        found = LAYER_MAP.match(text.strip())
        if found is None:
            raise UsageError(f"{source} {text!r}: expected LAYER=KERNEL_LAYER, a transformers layer name and the "
                             "kernel's layer (RMSNorm=LigerRMSNorm, rotary_pos_emb=apply_rotary_transformers)")
        if any(m.layer == found[1] for m in maps):
            raise UsageError(f"{source} {text!r}: {found[1]} is mapped twice; one kernel layer replaces it")
        maps.append(LayerMap(found[1], found[2], source=source))
    return maps


def kernel_maps(manifest, request: CheckRequest, python: str) -> list[LayerMap]:
    """What to check a kernel's layers against: --map, else its build.toml's, else transformers' mapping."""
    return (parse_maps(request.maps) or parse_maps(manifest.check_layers_map, CONFIG)
            or transformers_maps(manifest.hub_repo_id, python))


def suite_maps(manifest, python: str) -> list[LayerMap]:
    """What `kbuild test` checks after a kernel's suite: its build.toml's maps, else what the transformers of
    `python` maps to its repo id; none (nothing to check) when neither says anything or there is no
    transformers there to ask."""
    if manifest.check_layers_map:
        return parse_maps(manifest.check_layers_map, CONFIG)
    try:
        return transformers_maps(manifest.hub_repo_id, python)
    except UsageError:  # no transformers there, or it maps nothing to this kernel: most kernels
        return []


def transformers_maps(repo_id: str | None, python: str) -> list[LayerMap]:
    """The layers the transformers of `python` binds to `repo_id` by default, with the modes it binds
    them for; a one-line error saying what to pass when it binds none."""
    hint = "pass --map LAYER=KERNEL_LAYER (e.g. --map RMSNorm=RMSNorm) to say which layer it replaces"
    if repo_id is None:
        raise UsageError("check-layers: the kernel names no hub repo id ([general.hub] repo-id) to look up in "
                         "transformers' mapping", hint=hint)
    data = read(python, what="check-layers", isolated=False)  # the transformers the check itself will import
    maps = []
    for row in data.get("layers", []):
        if row["repo_id"] != repo_id:
            continue
        flags = row["modes"]
        modes = ("inference", "training") if "FALLBACK" in flags or "TRAINING" in flags else ("inference",)
        maps.append(LayerMap(row["layer"], row["kernel_layer"], modes,
                             f"transformers {data['transformers']} ({', '.join(row['devices'])}: "
                             f"{', '.join(m.lower() for m in flags)})"))
    if not maps:
        raise UsageError(f"check-layers: transformers {data['transformers']} ({python}) maps no layer to {repo_id}",
                         hint=hint)
    return maps


def check_folder(folder: Path, variants: tuple[str, ...], python: str, request: CheckRequest, reporter,
                 settings: BuilderSettings) -> list[VariantCheck]:
    """Each kernel of `folder`, each built variant that can run here (or those named)."""
    kernels = kernel_dirs(folder)
    check_named(folder, kernels, variants)
    done: list[VariantCheck] = []
    target = None
    for kernel in kernels:
        manifest = load_manifest(kernel)
        built = built_variants(kernel / BUILD_DIR, variants)
        if not built:
            why = f"no built variant{' named ' + ', '.join(variants) if variants else ''} in {kernel / BUILD_DIR}"
            if len(kernels) == 1:
                raise UsageError(f"{kernel}: {why}", hint=f"run kbuild build {kernel} first")
            done.append(VariantCheck(manifest.name, "-", skipped=why))
            continue
        maps = kernel_maps(manifest, request, python)
        if target is None:
            target = probe_once(python, reporter, "checks")
        for choice in choose(kernel / BUILD_DIR, built, target, named=bool(variants), does="checks"):
            if choice.left_out:
                done.append(VariantCheck(manifest.name, choice.variant.name, skipped=choice.left_out))
                continue
            placed = place(choice.variant.name, choice.hide_gpus, gpu_visible(target.system), "checks")
            if placed.gpu_missing:
                done.append(VariantCheck(manifest.name, choice.variant.name,
                                         skipped="a CUDA variant and no CUDA device here"))
                continue
            check = VariantCheck(manifest.name, choice.variant.name, placed.where + choice.as_asked, maps)
            log = kernel / WORK_DIR / choice.variant.name / "check-layers.log"
            asked = replace(request, model=request.model or manifest.check_layers_model)
            with reporter.phase(f"checking {manifest.name}/{choice.variant.name}'s layers {placed.where}"):
                check.report = run_variant(manifest.python_name, choice.variant, python, placed.device, placed.env,
                                           settings.pythonpath, maps, asked, log)
            keep(check, choice.variant, kernel / WORK_DIR / choice.variant.name / LAYER_CHECK)
            done.append(check)
    return done


def after_suite(result, manifest, variant_dir: Path, placed, python: str, maps: list[LayerMap], settings,
                reporter):
    """`kbuild test`'s row for a variant, with its layer check after the suite: a failure when a layer differs
    or the map is wrong, a line under the row either way."""
    if placed.gpu_missing:
        return replace(result, details=(*result.details, "layers not checked: a CUDA variant and no CUDA device here"))
    check = VariantCheck(manifest.name, variant_dir.name, placed.where, maps)
    log = manifest.root / WORK_DIR / variant_dir.name / "check-layers.log"
    request = CheckRequest(model=manifest.check_layers_model)
    try:
        with reporter.phase(f"checking {manifest.name}/{variant_dir.name}'s layers against transformers"):
            check.report = run_variant(manifest.python_name, variant_dir, python, placed.device, placed.env,
                                       settings.pythonpath, maps, request, log)
    except LayersUnavailable as e:
        return replace(result, details=(*result.details, f"layers not checked: {e}"))
    except UsageError as e:  # a map the kernel or the model cannot honour: the kernel's fault, said on its row
        return replace(result, status="failed", reason=f"{result.reason}; layer check: {e}",
                       details=(*result.details, f"layer check: {e}"))
    keep(check, variant_dir, manifest.root / WORK_DIR / variant_dir.name / LAYER_CHECK)
    verdict = check.verdict()
    names = ", ".join(f"{m.layer} <- {m.kernel_layer}" for m in maps)
    line = (f"layers ({names}) against transformers {check.report['transformers']}: "
            + ", ".join(f"{part} {'ok' if ok else 'DIFFERS'}" for part, ok in verdict.items() if ok is not None))
    differ = [f"{r['layer']} ({r['kernel_layer']}), {r['dtype']}, {r['mode']}: {r['part']}: {r['quantity']} "
              f"differs" for r in check.failures if r["layer"] != "model"]
    if not differ and not check.failures:
        return replace(result, details=(*result.details, line))
    raised = [f"the kernelized model, {r['dtype']}, {r['mode']}: {r['quantity'].removeprefix('the kernelized model ')}"
              for r in check.failures if r.get("why") == "raised"]
    first = (differ or raised or ["the whole model differs"])[0]
    return replace(result, status="failed", reason=f"{result.reason}; layers: {first} (kbuild check-layers "
                   f"{manifest.root} --variant {variant_dir.name} says more)", details=(*result.details, line, *differ))


def keep(check: VariantCheck, variant_dir: Path, record: Path) -> None:
    """The variant's latest check, for `kbuild publish` to put beside it: tied to the metadata.json it
    checked by digest, so a rebuilt variant is not published with an older build's result."""
    data = {"metadata_sha256": hashlib.sha256((variant_dir / "metadata.json").read_bytes()).hexdigest(),
            "verdict": check.verdict(), **check.to_json()}
    record.parent.mkdir(parents=True, exist_ok=True)
    partial = record.with_suffix(".partial")
    partial.write_text(json.dumps(data, indent=1))
    partial.replace(record)  # whole or not at all


def check_published(request_text: str, hub: str | None, reporter, request: CheckRequest, python: str,
                    trust_remote_code: bool = False) -> VariantCheck:
    """`kbuild check-layers ORG/NAME@REV`: the variant get_kernel would load for the torch of `python`,
    fetched and verified by kbuild's loader (its trust rule applies: checking runs the repo's code), checked
    in `python`."""
    try:
        ref = parse_request(request_text)
        check_trust(ref.repo_id, parse_hub_address(hub).endpoint, trust_remote_code, from_environment())
        target = probe_once(python, reporter, "checks")
        with reporter.phase(f"resolving {request_text}"):
            found = resolve_kernel(request_text, hub=hub, system=target.system)
        if found.chosen is None:
            raise UsageError(f"{request_text}: no variant at {found.commit[:12]} loads in {target.describe()}\n"
                             f"{format_trace(list(found.trace))}")
        with reporter.phase(f"fetching {ref.repo_id}@{found.commit[:12]} {variant_folder(found.chosen)}"):
            folder = install_kernel(ref.repo_id, revision=found.commit, hub=hub, variant=found.chosen,
                                    system=target.system)
    except KernelError as e:  # the loader's own one-line errors (no such repo, revision, trust, digest)
        raise UsageError(str(e)) from None
    maps = parse_maps(request.maps) or transformers_maps(ref.repo_id, python)
    name = ref.repo_id.split("/")[1]
    python_name = VariantMetadata.for_variant(folder).python_name or name.replace("-", "_")
    placed = place(found.chosen, False, gpu_visible(target.system), "checks")
    if placed.gpu_missing:
        raise UsageError(f"{request_text}: the variant that loads here, {found.chosen}, is built for a GPU, and "
                         "torch sees none: its layers have nothing to run on")
    check = VariantCheck(name, found.chosen, placed.where, maps)
    with tempfile.TemporaryDirectory(prefix="kbuild-check-layers-") as work, \
            reporter.phase(f"checking {ref.repo_id}@{found.commit[:12]} {found.chosen}'s layers {placed.where}"):
        check.report = run_variant(python_name, Path(folder), python, placed.device, placed.env, None, maps,
                                   request, Path(work) / "check-layers.log")
    return check


def _error_line(log: Path) -> str:
    """The line of a crashed check's log that says what went wrong: its exception, else its last line."""
    lines = log.read_text(errors="replace").strip().splitlines() or ["no output"]
    raised = [line for line in lines if re.match(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt): ", line)]
    return (raised or lines)[-1][:300]


def run_variant(python_name: str, variant_dir: Path, python: str, device: str, env: dict[str, str],
                pythonpath: str | None, maps: list[LayerMap], request: CheckRequest, log: Path) -> dict:
    """The runner's report for one variant; a UsageError when it found the request cannot be checked
    (a layer the kernel lacks, one no module of the model carries), a CommandError-like UsageError with
    the log's last line when it failed."""
    dtypes = list(request.dtypes) or (["float32", "bfloat16"] if device == "cuda" else ["float32"])
    spec = {"kernel": python_name, "device": device, "model": request.model or "llama",
            "modes": list(MODES[request.mode]),
            "dtypes": dtypes, "maps": [m.spec() for m in maps],
            "tolerance": {d: list(TOLERANCES[d]) for d in dtypes}}
    log.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kbuild-check-layers-") as tmp:
        env = {**env, **import_variant_from(Path(tmp), python_name, variant_dir, pythonpath)}
        runner = Path(tmp) / f"{_RUNNER}.py"
        runner.write_bytes(resources.read_bytes(f"templates/{_RUNNER}.py"))
        (Path(tmp) / "spec.json").write_text(json.dumps(spec))
        out = Path(tmp) / "report.json"
        code = proc.run_logged([python, str(runner), "--spec", str(Path(tmp) / "spec.json"), "--out", str(out)],
                               log, cwd=Path(tmp), env=env, timeout=TIMEOUT_S)
        if code is None:
            raise UsageError(f"{variant_dir.name}: the layer check stopped after {TIMEOUT_S} s (log {log})")
        if code != 0 or not out.is_file():
            raise UsageError(f"{variant_dir.name}: the layer check failed (exit {code}): {_error_line(log)} "
                             f"(log {log})")
        report = json.loads(out.read_text())
    if "bad_input" in report:
        raise UsageError(f"check-layers: {report['bad_input']}")
    if "unavailable" in report:
        raise LayersUnavailable(f"check-layers: {report['unavailable']}")
    return report
