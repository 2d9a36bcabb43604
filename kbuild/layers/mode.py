"""What a model is kernelized for (`Mode`), which registered kernel serves which mode, and when
kernelize may keep a module's own forward (`KernelizeFallback`). Same flags, and the same choice
between them, as Hugging Face's `kernels`, so mappings written for it read the same here."""

from __future__ import annotations

from enum import Flag, auto

from ..errors import InvalidRequest


class Mode(Flag):
    """INFERENCE or TRAINING, optionally with TORCH_COMPILE (`Mode.TRAINING | Mode.TORCH_COMPILE`).
    FALLBACK only registers a kernel for whatever mode no other entry serves."""

    FALLBACK = auto()
    TRAINING = auto()
    INFERENCE = auto()
    TORCH_COMPILE = auto()

    def __or__(self, other: Mode) -> Mode:
        union = super().__or__(other)
        if Mode.INFERENCE in union and Mode.TRAINING in union:
            raise InvalidRequest("Mode.INFERENCE and Mode.TRAINING are mutually exclusive")
        if Mode.FALLBACK in union and union != Mode.FALLBACK:
            raise InvalidRequest("Mode.FALLBACK cannot be combined with other modes")
        return union


class KernelizeFallback(Flag):
    """The cases in which kernelize keeps a module's own forward instead of raising. DEFAULT
    (use_fallback=True): every case but a kernel that cannot be loaded; ALL: that one too. A
    kernel that fails verification (digest, signature, trust) is never a fallback case."""

    NONE = 0
    NO_LAYER = auto()  # no mapping for the layer's name
    NO_DEVICE = auto()  # a mapping, but none for this device type
    NO_COMPATIBLE_PROPERTIES = auto()  # none for this GPU's capability
    NO_COMPATIBLE_MODE = auto()  # none for the mode, or the layer lacks backward / torch.compile
    CANNOT_LOAD = auto()  # no variant of the kernel fits, or it is not on the hub

    DEFAULT = NO_LAYER | NO_DEVICE | NO_COMPATIBLE_PROPERTIES | NO_COMPATIBLE_MODE
    ALL = DEFAULT | CANNOT_LOAD


def requested_mode(mode, torch_compile: bool = False) -> Mode:
    """The mode kernelize was asked for: a Mode, or "inference" / "training" (kbuild's older
    spelling, with `torch_compile=True` for TORCH_COMPILE)."""
    if isinstance(mode, str):
        named = {"inference": Mode.INFERENCE, "training": Mode.TRAINING}.get(mode)
        if named is None:
            raise InvalidRequest(f"kernelize: mode must be a Mode or one of inference, training, got {mode!r}")
        mode = named
    if not isinstance(mode, Mode):
        raise InvalidRequest(f"kernelize: mode must be a Mode (Mode.INFERENCE, Mode.TRAINING, ...), got {mode!r}")
    if mode == Mode.FALLBACK:
        raise InvalidRequest("kernelize: Mode.FALLBACK can only be used to register kernel mappings")
    # mypy narrows a Flag to its members alone after the == above, so `in` looks unsupported to it
    if Mode.INFERENCE not in mode and Mode.TRAINING not in mode:  # type: ignore[operator]
        raise InvalidRequest(f"kernelize: mode must contain Mode.INFERENCE or Mode.TRAINING, got {mode}")
    return mode | Mode.TORCH_COMPILE if torch_compile else mode


def serving_order(registered, wanted: Mode) -> list[Mode]:
    """The registered modes that can serve `wanted`, best first. A kernel registered for training
    serves inference too (not the other way round: it may lack a backward), and one registered for
    torch.compile serves eager runs (not the other way round); the closest registration wins, and
    FALLBACK comes last."""
    def serves(mode: Mode) -> bool:
        return ((Mode.TRAINING not in wanted or Mode.TRAINING in mode)
                and (Mode.TORCH_COMPILE not in wanted or Mode.TORCH_COMPILE in mode))

    def distance(mode: Mode) -> tuple[bool, bool]:
        return ((Mode.TRAINING in mode) != (Mode.TRAINING in wanted),
                (Mode.TORCH_COMPILE in mode) != (Mode.TORCH_COMPILE in wanted))

    usable = sorted((m for m in registered if m != Mode.FALLBACK and serves(m)), key=distance)
    return usable + [Mode.FALLBACK] * (Mode.FALLBACK in registered)
