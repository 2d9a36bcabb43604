"""fused_relu: the Python package every variant ships (a fixture: no ops)."""
