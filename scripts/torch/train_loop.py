# SPDX-License-Identifier: Apache-2.0
"""A training loop as the hang watch sees one: gloo all-reduces from the
environment mn_nccl set, STEPS of them, one every 0.1 s. Each rank writes
its pid to $MN_WATCH_PIDS/pid.RANK once it is in the loop (for the test that
stops or kills it). With PAUSE_AT=K PAUSE=S PAUSE_RANKS=all|0, the named
ranks sleep S seconds before step K (a checkpoint save by all, or by rank 0
alone while the others wait in the next all-reduce). Prints
  WATCHED rank=R fr_buffer=N watch_dir=D dir_mode=0700
at the start and DONE rank=R steps=N at the end.
"""
import os
import sys
import time

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("gloo", init_method="env://")
    rank = dist.get_rank()
    steps = int(os.environ.get("STEPS", "50"))
    pause_at = int(os.environ.get("PAUSE_AT", "-1"))
    pause = float(os.environ.get("PAUSE", "0"))
    who = os.environ.get("PAUSE_RANKS", "all")
    d = os.environ.get("MN_NCCL_WATCH_DIR", "")
    mode = oct(os.stat(d).st_mode & 0o777) if d else "-"
    print(f"WATCHED rank={rank} fr_buffer={os.environ.get('TORCH_FR_BUFFER_SIZE', '-')} watch_dir={d} "
          f"dir_mode={mode}", flush=True)
    pids = os.environ.get("MN_WATCH_PIDS")
    if pids:
        with open(f"{pids}/pid.{rank}", "w") as f:
            f.write(str(os.getpid()))
    t = torch.ones(1024)
    for i in range(steps):
        if i == pause_at and (who == "all" or str(rank) == who):
            time.sleep(pause)
        dist.all_reduce(t)
        t.fill_(1.0)
        time.sleep(0.1)
    dist.barrier()
    print(f"DONE rank={rank} steps={steps}", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
