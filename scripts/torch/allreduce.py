# SPDX-License-Identifier: Apache-2.0
"""A real training client: a gloo all-reduce with nothing but the environment
that mn_nccl set (env:// rendezvous). Prints one line per rank:
  ALLREDUCE rank=R world=W local_rank=L node_rank=N host=H sum=S expected=E ok=1 \
            master=ADDR:PORT ifname=IF
Exits non-zero when the sum is wrong.
"""
import os
import socket
import sys

import torch
import torch.distributed as dist


def main():
    # env:// reads MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE, which come
    # from the plugin (task mode) or from torchrun (node mode).
    dist.init_process_group("gloo", init_method="env://")
    rank = dist.get_rank()
    world = dist.get_world_size()
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t)
    expected = world * (world + 1) / 2
    ok = int(t.item() == expected)
    print(
        f"ALLREDUCE rank={rank} world={world} local_rank={os.environ.get('LOCAL_RANK')} "
        f"node_rank={os.environ.get('NODE_RANK', os.environ.get('GROUP_RANK'))} host={socket.gethostname()} "
        f"sum={t.item():g} expected={expected:g} ok={ok} "
        f"master={os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')} "
        f"ifname={os.environ.get('GLOO_SOCKET_IFNAME')}",
        flush=True,
    )
    dist.barrier()
    dist.destroy_process_group()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
