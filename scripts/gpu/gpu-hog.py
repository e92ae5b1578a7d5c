# SPDX-License-Identifier: Apache-2.0
"""Another process on the GPU that CUDA_VISIBLE_DEVICES names, for the GPU
proofs (gpu-proof.sh, gpu-readiness.sh): KIND "memory" holds all but 512 MiB
of it, "compute" runs a matrix product loop. Prints one "HOG ..." line once
it holds or computes, then runs until killed (memory: 600 s at most).
   python3 scripts/gpu/gpu-hog.py memory|compute"""
import sys
import time

import torch

if sys.argv[1] == "memory":
    free, total = torch.cuda.mem_get_info()
    x = torch.empty(free - (512 << 20), dtype=torch.uint8, device="cuda")
    print(f"HOG holds {x.numel() >> 20} MiB of {total >> 20}", flush=True)
    time.sleep(600)
else:
    a = torch.randn(8192, 8192, device="cuda")
    print("HOG computes", flush=True)
    while True:
        a = torch.tanh(a @ a)
