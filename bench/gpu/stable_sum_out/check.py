"""Loads one build of ext.cpp and compares its group_sum with torch's own sum (run.sh drives it)."""

import sys

import torch

torch.ops.load_library(sys.argv[1])
x = torch.randn(2, 3, 4, 5)
try:
    ok = torch.allclose(torch.ops.stable_sum_out.group_sum(x), x.sum(2))
    print(f"{sys.argv[2]:<28} {'right' if ok else 'WRONG RESULT'}")
except RuntimeError as e:
    print(f"{sys.argv[2]:<28} fails: {str(e).splitlines()[0][:110]}")
