"""Rotary position embedding (GPT-NeoX and GPT-J styles) in Triton, forward and backward; q and k
together in one launch with `apply_rotary_qk`."""

from ._ops import ops, add_op_namespace_prefix
from . import layers
from .functions import apply_rotary, apply_rotary_qk

__all__ = ["apply_rotary", "apply_rotary_qk", "layers"]
