"""A linked library with undefined symbols, explained: which source calls each symbol and which
`[kernel.*]` section of build.toml defines it, when this build left that section out.

The usual cause is `--cuda-archs` (or the GPU's own arch): a section that lists none of the asked
archs is not compiled, and a binding that calls into it unconditionally (no `#if` around the call)
then links a library that cannot load. kbuild refuses such a variant and names the archs that
bring the section back; it never compiles a section for archs nobody asked for behind the user's
back (README, "Building for one GPU").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from builder.backends.cuda_arch import parse_capability
from builder.plan.steps import SOURCE_SUFFIXES, VariantPlan
from builder.project.manifest import KernelSection, Manifest
from builder.stage.link_check import LinkCheck
from builder.toolchains.binary import for_os
from kbuild_common import proc
from kbuild_common.errors import CommandError

SHOWN = 8  # symbols listed under the reason; the rest are counted


@dataclass(frozen=True)
class Symbol:
    mangled: str
    readable: str  # demangled
    callers: tuple[str, ...]  # sources (relative to the kernel root) whose objects call it
    definers: tuple[str, ...]  # left-out sections whose compiled sources define it

    @property
    def name(self) -> str:
        """The bare function or variable name: `ns::f<int>(at::Tensor)` -> `f`."""
        head = re.sub(r"<[^<>]*>", "", re.sub(r"<[^<>]*>", "", self.readable)).split("(")[0].strip()
        return head.split()[-1].split("::")[-1] if head else self.mangled


@dataclass(frozen=True)
class Explained:
    reason: str  # one line
    details: tuple[str, ...]


def explain(plan: VariantPlan, manifest: Manifest, check: LinkCheck, archs_origin: str = "",
            archs: tuple[str, ...] = ()) -> Explained:
    """The one-line reason and the lines under it for a library whose `check` found undefined
    symbols. `archs_origin`/`archs`: what restricted the build's CUDA archs (`--cuda-archs`, ...)."""
    readable = demangle(list(check.undefined))
    binary = for_os(plan.library_os)  # the objects are in the format of the variant's libraries
    objects = [u.output for u in plan.units]
    sources = {u.output: _relative(u.source, manifest.root) for u in plan.units}
    left_out = _left_out_sections(plan, manifest)
    symbols = []
    for mangled in check.undefined:
        name = readable.get(mangled, mangled)
        callers = tuple(dict.fromkeys(sources[o] for o in binary.object_references(objects, mangled)))
        symbol = Symbol(mangled, name, callers, ())
        definers = tuple(s.name for s in left_out if _mentions(s, manifest.root, symbol.name))
        symbols.append(Symbol(mangled, name, callers, definers))
    library = plan.library.name if plan.library else plan.name
    first = symbols[0]
    more = f" (and {len(symbols) - 1} more)" if len(symbols) > 1 else ""
    reason = f"{library} cannot load: undefined symbol {first.readable}{more}"
    if first.callers:
        reason += f", called from {first.callers[0]}"
    needed = list(dict.fromkeys(d for s in symbols for d in s.definers))
    skipped = dict(plan.skipped_sections)
    if needed:
        sections = ", ".join(f"[kernel.{n}] ({', '.join(skipped.get(n, ()))})" for n in needed)
        reason += f"; defined in {sections}" + _remedy(needed, skipped, manifest, archs_origin, archs)
    else:
        reason += "; no section of build.toml defines it (a source missing from a [kernel.*] src list, or a " \
                  "library the kernel must link?)"
    details = [f"{s.readable}: called from {', '.join(s.callers) or 'an object of the link'}"
               + (f"; defined in {', '.join(f'[kernel.{d}]' for d in s.definers)}" if s.definers else "")
               for s in symbols[:SHOWN]]
    if len(symbols) == 1:
        details = []  # the reason says it all
    if len(symbols) > SHOWN:
        details.append(f"and {len(symbols) - SHOWN} more undefined symbol(s)")
    if check.not_found:
        details.append(f"not found here, so not searched: {', '.join(check.not_found)}")
    return Explained(reason, tuple(details))


def _remedy(needed: list[str], skipped: dict, manifest: Manifest, origin: str, archs: tuple[str, ...]) -> str:
    """What to pass instead: the asked archs plus those of the sections the library calls into."""
    by_arch = [n for n in needed if n in skipped]
    if not by_arch:  # left out by its cuda-minver: the CUDA version decides, not the archs
        minvers = {s.name: s.cuda_minver for s in manifest.kernels_for("cuda") if s.name in needed}
        return ", left out of builds with an older CUDA: it needs CUDA " + ", ".join(
            f">= {v} ([kernel.{n}])" for n, v in minvers.items())
    wanted = [*archs, *(a for n in by_arch for a in skipped[n])]
    caps = sorted(dict.fromkeys(parse_capability(a) for a in wanted))
    listed = ";".join(str(c) for c in caps)
    flag = f'TORCH_CUDA_ARCH_LIST="{listed}"' if origin == "TORCH_CUDA_ARCH_LIST" else f'--cuda-archs "{listed}"'
    asked = f"{origin or '--cuda-archs'} {';'.join(archs)}".strip()
    return f", which {asked} left out: build with {flag} to compile {'it' if len(by_arch) == 1 else 'them'} too, " \
           "or without --cuda-archs"


def _left_out_sections(plan: VariantPlan, manifest: Manifest) -> list[KernelSection]:
    """The sections of the variant's backend that have no unit in it: left out by --cuda-archs or by
    their cuda-minver."""
    built = {u.section for u in plan.units}
    return [s for s in manifest.kernels_for(plan.variant.backend) if s.name not in built]


def _mentions(section: KernelSection, root: Path, name: str) -> bool:
    """Whether one of the section's compiled sources names `name` as a function (`name(` or
    `name<...>(`), which is how a definition reads; headers are shared and left aside."""
    pattern = re.compile(rf"\b{re.escape(name)}\s*(<[^;{{}}]*?>)?\s*\(")
    for src in section.src:
        if Path(src).suffix not in SOURCE_SUFFIXES:
            continue
        try:
            if pattern.search((root / src).read_text(errors="replace")):
                return True
        except OSError:
            continue
    return False


def demangle(symbols: list[str]) -> dict[str, str]:
    """Each C++ symbol as people read it, by binutils' c++filt (beside the linker that made the
    library); a name it cannot read stays as it is."""
    mangled = [s for s in symbols if s.startswith("_Z")]
    if not mangled:
        return {}
    try:
        out = proc.run(["c++filt", *mangled], timeout=60, what="c++filt").stdout.splitlines()
    except CommandError:
        return {}
    return dict(zip(mangled, out, strict=True)) if len(out) == len(mangled) else {}


def _relative(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)
