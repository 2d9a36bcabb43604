"""The CPU backend: host C++ against torch's CPU libraries; every default of Backend holds."""

from __future__ import annotations

from builder.backends.base import Backend


class Cpu(Backend):
    name = "cpu"
    device = "cpu"


CPU = Cpu()
