# SPDX-License-Identifier: Apache-2.0
"""The usual recipe on real GPUs: torch.cuda.set_device(LOCAL_RANK) and an
NCCL all-reduce, with nothing but the environment mn_nccl set. For each rank
it checks that the GPU LOCAL_RANK selects is the one CUDA_VISIBLE_DEVICES
names at that place (by PCI bus id, as nvidia-smi numbers GPUs: Slurm's
numbering under AutoDetect=nvml), that no two ranks of a host share a GPU,
and how many of the host's other visible GPUs it reaches peer to peer (what
NCCL's P2P/NVLink transport needs). One line per rank:
  GPURANK rank=R local_rank=L host=H cvd=LIST device=D bus=B expected_bus=E \
          peers=P p2p=Q sum=S ok=1
and rank 0 prints GPUCHECK ok=1 (or ok=0 with why). Exits non-zero on any
failure. Run it in task mode (srun --mn-nccl=auto python gpu_local_rank.py)
or under torchrun (node mode).
"""
import os
import socket
import subprocess
import sys

import torch
import torch.distributed as dist


def nvml_bus_ids():
    """nvidia-smi's index -> PCI bus id (PCI order, CUDA_DEVICE_ORDER=PCI_BUS_ID)."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=index,pci.bus_id", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30, check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    ids = {}
    for line in out.splitlines():
        index, bus = [x.strip() for x in line.split(",")]
        ids[index] = bus.lower()[-12:]  # 00000000:18:00.0 -> 0000:18:00.0
    return ids


def bus_of(device):
    p = torch.cuda.get_device_properties(device)
    if hasattr(p, "pci_bus_id"):  # torch >= 2.5
        return f"{p.pci_domain_id:04x}:{p.pci_bus_id:02x}:{p.pci_device_id:02x}.0"
    return "?"


def main():
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)  # the recipe under test
    dist.init_process_group("nccl", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    names = cvd.split(",") if cvd else []
    bus = bus_of(local_rank)
    expected = nvml_bus_ids().get(names[local_rank], "?") if local_rank < len(names) else "?"
    others = [d for d in range(torch.cuda.device_count()) if d != local_rank]
    p2p = sum(torch.cuda.can_device_access_peer(local_rank, d) for d in others)

    t = torch.tensor([float(rank + 1)], device="cuda")
    dist.all_reduce(t)
    want = world * (world + 1) / 2
    ok = t.item() == want and (bus == expected or "?" in (bus, expected))
    print(
        f"GPURANK rank={rank} local_rank={local_rank} host={socket.gethostname()} cvd={cvd} "
        f"device={torch.cuda.current_device()} bus={bus} expected_bus={expected} peers={len(others)} "
        f"p2p={p2p} order={os.environ.get('CUDA_DEVICE_ORDER', '')} sum={t.item():g} ok={int(ok)}",
        flush=True,
    )
    # No two ranks of one host on one GPU (NCCL would refuse them anyway).
    seen = [None] * world
    dist.all_gather_object(seen, (socket.gethostname(), bus if bus != "?" else f"{cvd}[{local_rank}]", ok))
    if rank == 0:
        places = [(h, b) for h, b, _ in seen]
        why = []
        if len(set(places)) != len(places):
            why.append("two ranks share a GPU")
        if not all(o for _, _, o in seen):
            why.append("a rank's GPU or sum is wrong")
        print(f"GPUCHECK ranks={world} ok={int(not why)}{' why=' + ';'.join(why) if why else ''}", flush=True)
        ok = ok and not why
    dist.barrier()
    dist.destroy_process_group()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
