# SPDX-License-Identifier: Apache-2.0
"""Reads a task's Slurm variables the way Slurm-aware frameworks do, and
checks them against the plugin's and against every other task's, over a
real gloo all-reduce.

  slurm_view.py DEVICES NUM_NODES

DEVICES and NUM_NODES are what the user would give Lightning
(Trainer(devices=..., num_nodes=...)). The checks re-state, from reading its
source, what Lightning 2.6's SLURMEnvironment does: several tasks need
SLURM_NTASKS_PER_NODE; SLURM_NTASKS_PER_NODE must equal devices and
SLURM_NNODES num_nodes; world size, global, local and node rank come from
SLURM_NTASKS, SLURM_PROCID, SLURM_LOCALID, SLURM_NODEID; the main address is
MASTER_ADDR, else the first host of SLURM_NODELIST. submitit reads
SLURM_JOB_NUM_NODES and SLURM_JOB_NODELIST. Prints one line per task:
  SLURMVIEW rank=R node=N local=L nodes=M host=NAME ok=1
and exits non-zero (with the reason on the line) when anything disagrees.
"""
import os
import re
import sys

import torch
import torch.distributed as dist


def first_host(nodes):
    # Lightning's resolve_root_node_address, in its own words: the first host
    # of a range, of a comma list or of a space list.
    nodes = re.sub(r"\[(.*?)[,-].*\]", "\\1", nodes)
    nodes = re.sub(r"\[(.*?)\]", "\\1", nodes)
    return nodes.split(" ")[0].split(",")[0]


def expand(nodes):
    # Slurm host lists as submitit expands them: PREFIX[a-b,c]SUFFIX groups.
    out = []
    for group in re.findall(r"[^,\[]+(?:\[[^\]]*\][^,\[]*)*", nodes):
        names = [""]
        for text, ranges in re.findall(r"([^\[]*)(?:\[([^\]]*)\])?", group):
            names = [n + text for n in names]
            if ranges:
                suffixes = []
                for part in ranges.split(","):
                    lo, _, hi = part.partition("-")
                    hi = hi or lo
                    suffixes += [f"{i:0{len(lo)}d}" for i in range(int(lo), int(hi) + 1)]
                names = [n + s for n in names for s in suffixes]
        out += [n for n in names if n]
    return out


def main():
    devices, num_nodes = int(sys.argv[1]), int(sys.argv[2])
    env = os.environ
    problems = []
    ntasks = int(env.get("SLURM_NTASKS", "1"))
    if ntasks > 1 and "SLURM_NTASKS_PER_NODE" not in env:
        problems.append(f"--ntasks={ntasks} without SLURM_NTASKS_PER_NODE (Lightning refuses)")
    elif env.get("SLURM_NTASKS_PER_NODE") is not None and int(env["SLURM_NTASKS_PER_NODE"]) != devices:
        problems.append(f"SLURM_NTASKS_PER_NODE={env['SLURM_NTASKS_PER_NODE']} != devices={devices}")
    if env.get("SLURM_NNODES") is not None and int(env["SLURM_NNODES"]) != num_nodes:
        problems.append(f"SLURM_NNODES={env['SLURM_NNODES']} != num_nodes={num_nodes}")
    world, rank = int(env["SLURM_NTASKS"]), int(env["SLURM_PROCID"])
    local, node = int(env["SLURM_LOCALID"]), int(env["SLURM_NODEID"])
    address = env.get("MASTER_ADDR") or first_host(env.get("SLURM_NODELIST", "127.0.0.1"))
    port = int(env["MASTER_PORT"])
    # The plugin's own variables must say the same.
    for ours, theirs in (("RANK", rank), ("LOCAL_RANK", local), ("NODE_RANK", node), ("WORLD_SIZE", world),
                         ("NNODES", int(env["SLURM_NNODES"]))):
        if env.get(ours) is not None and int(env[ours]) != theirs:
            problems.append(f"{ours}={env[ours]} but Slurm's variables give {theirs}")
    hosts = expand(env["SLURM_NODELIST"])
    if len(hosts) != num_nodes or hosts[node] != env.get("SLURMD_NODENAME"):
        problems.append(f"SLURM_NODELIST={env['SLURM_NODELIST']} has no {env.get('SLURMD_NODENAME')} at {node}")
    if int(env.get("SLURM_JOB_NUM_NODES", "0")) != len(expand(env.get("SLURM_JOB_NODELIST", ""))):
        problems.append("SLURM_JOB_NUM_NODES disagrees with SLURM_JOB_NODELIST")

    # Rendezvous on what the framework derived, then compare with everyone.
    dist.init_process_group("gloo", init_method=f"tcp://{address}:{port}", rank=rank, world_size=world)
    mine = torch.tensor([node, local, rank], dtype=torch.int64)
    every = [torch.zeros(3, dtype=torch.int64) for _ in range(world)]
    dist.all_gather(every, mine)
    total = torch.tensor([float(rank)])
    dist.all_reduce(total)
    pairs = {(int(t[0]), int(t[1])) for t in every}
    per_node = {}
    for t in every:
        per_node.setdefault(int(t[0]), []).append(int(t[1]))
    if len(pairs) != world:
        problems.append("two tasks share a (node, local rank)")
    if sorted(per_node) != list(range(num_nodes)):
        problems.append(f"node ids {sorted(per_node)} are not 0..{num_nodes - 1}")
    for n, locals_ in per_node.items():
        if sorted(locals_) != list(range(devices)):
            problems.append(f"node {n} has local ranks {sorted(locals_)}")
    if total.item() != world * (world - 1) / 2:
        problems.append(f"all-reduce of the ranks gave {total.item():g}")
    dist.destroy_process_group()
    ok = int(not problems)
    print(f"SLURMVIEW rank={rank} node={node} local={local} nodes={len(per_node)} "
          f"host={env.get('SLURMD_NODENAME')} sum={total.item():g} ok={ok}"
          + ("" if ok else " problems=" + "; ".join(problems)), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
