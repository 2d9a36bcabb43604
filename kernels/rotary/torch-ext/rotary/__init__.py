"""Rotary position embedding (GPT-NeoX and GPT-J styles) in Triton, forward and backward."""

from ._ops import ops, add_op_namespace_prefix
from . import layers
from .functions import apply_rotary

__all__ = ["apply_rotary", "layers"]
