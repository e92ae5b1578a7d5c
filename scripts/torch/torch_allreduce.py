# SPDX-License-Identifier: Apache-2.0
"""PyTorch's own all-reduce with NCCL, for the side-by-side benchmark with
mn-preflight (scripts/gpu/gpu-proof.sh): same GPUs, same size, same count of
warm-up and timed iterations, in-place, timed as one loop. Rank 0 prints
  TORCH ranks=N bytes=B iters=I time_ms=T algbw=A busbw=B correct=1
Run under srun --mn-nccl=auto (task mode): the plugin gives the env://
variables and LOCAL_RANK.
"""
import os
import sys
import time

import torch
import torch.distributed as dist


def main():
    size = int(sys.argv[1]) if len(sys.argv) > 1 else 64 << 20
    iters = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    warmup = 5
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local % torch.cuda.device_count())
    dist.init_process_group("nccl", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    n = size // 4
    idx = torch.arange(n, device="cuda", dtype=torch.int64)
    x = ((rank + 1) * (1 + idx % 7)).to(torch.float32)
    dist.all_reduce(x)
    want = (world * (world + 1) / 2) * (1 + idx % 7).to(torch.float32)
    correct = int(torch.equal(x, want))
    for _ in range(warmup):
        dist.all_reduce(x)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(x)
    torch.cuda.synchronize()
    t = (time.perf_counter() - t0) / iters
    algbw = size / t / 1e9
    busbw = algbw * 2 * (world - 1) / world
    if rank == 0:
        print(f"TORCH ranks={world} bytes={size} iters={iters} time_ms={t * 1e3:.4f} "
              f"algbw={algbw:.2f} busbw={busbw:.2f} correct={correct}", flush=True)
    dist.destroy_process_group()
    return 0 if correct else 1


if __name__ == "__main__":
    sys.exit(main())
