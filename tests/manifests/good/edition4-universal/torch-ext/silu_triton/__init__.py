"""silu_triton: the Python package every variant ships (a fixture: no ops)."""
