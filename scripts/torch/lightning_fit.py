# SPDX-License-Identifier: Apache-2.0
"""A Lightning DDP fit as a user would write it, for --mn-emulate-nodes on GPUs.

  srun -N1 -n2 --gres=gpu:2 --mn-nccl=auto --mn-emulate-nodes=2 \
      python3 scripts/torch/lightning_fit.py --devices 1 --num-nodes 2

Trainer(accelerator="gpu", devices=DEVICES, num_nodes=NUM_NODES,
strategy="ddp") takes everything from Slurm's variables (Lightning's
SLURMEnvironment) and the plugin's MASTER_ADDR/MASTER_PORT. After a short
fit every rank all-reduces its global rank id; the sum must be
W*(W-1)/2. Lightning's ranks must match the plugin's (RANK, LOCAL_RANK,
NODE_RANK). Each rank's NCCL log (NCCL_DEBUG=INFO into a file per process)
gives the transport NCCL chose between and inside emulated nodes; between
them it must be NCCL's network transport (NET/...), since each emulated
node has its own NCCL_HOSTID. Rank 0 prints:
  LIGHTNING_FIT PASS world=W nodes=N devices=D sum=S ... between=NET/Socket x8 inside=P2P/CUMEM x8
or LIGHTNING_FIT FAIL with the reasons; the exit status is 0 only on PASS.
"""
import argparse
import collections
import os
import re
import sys
import tempfile

CHANNEL = re.compile(r"(\d+)\[\d+\] -> (\d+)\[\d+\] (?:\[(?:send|receive)\] )?via (\S+)")


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--devices", type=int, required=True, help="GPUs (tasks) per emulated node, Trainer(devices=)")
    p.add_argument("--num-nodes", type=int, required=True, help="emulated nodes, Trainer(num_nodes=)")
    p.add_argument("--steps", type=int, default=20, help="training steps (default 20)")
    p.add_argument("--nccl-log-dir", default=None,
                   help="where each rank's NCCL log goes (default: a new directory under /tmp)")
    p.add_argument("--no-require-net", action="store_true",
                   help="report NCCL's transport between emulated nodes without requiring NET/...")
    a = p.parse_args(argv)
    if a.devices < 1 or a.num_nodes < 1 or a.steps < 1:
        p.error("--devices, --num-nodes and --steps must be at least 1")
    return a


def summarize(counts):
    return ", ".join(f"{k} x{v}" for k, v in sorted(counts.items())) or "none seen"


def main(argv):
    args = parse_args(argv)
    # NCCL reads these when the first communicator is made, after this.
    log_dir = args.nccl_log_dir or os.path.join(tempfile.gettempdir(),
                                                f"mn-lightning-fit-{os.environ.get('SLURM_JOB_ID', 'nojob')}")
    os.makedirs(log_dir, exist_ok=True)
    own_log = os.path.join(log_dir, f"nccl.{os.getpid()}.log")
    # The channel lines are INFO: a machine's NCCL_DEBUG=WARN would hide them.
    if os.environ.get("NCCL_DEBUG", "").upper() not in ("INFO", "TRACE"):
        os.environ["NCCL_DEBUG"] = "INFO"
    os.environ["NCCL_DEBUG_FILE"] = own_log
    try:
        import torch
        import torch.distributed as dist
        from torch.utils.data import DataLoader, TensorDataset
        try:
            import lightning.pytorch as pl
            from lightning.fabric.plugins.environments import SLURMEnvironment
        except ImportError:
            import pytorch_lightning as pl
            from lightning_fabric.plugins.environments import SLURMEnvironment
    except ImportError as e:
        print(f"LIGHTNING_FIT FAIL cannot import torch/Lightning here ({e}); run it where Lightning is installed",
              flush=True)
        return 2

    expected_world = args.devices * args.num_nodes

    class Probe(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(32, 1)
            self.result = None

        def training_step(self, batch, _):
            x, y = batch
            return torch.nn.functional.mse_loss(self.layer(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

        def on_train_end(self):
            t = self.trainer
            problems = []
            env = os.environ
            if not isinstance(t.strategy.cluster_environment, SLURMEnvironment):
                problems.append(f"cluster environment is {type(t.strategy.cluster_environment).__name__}")
            if t.world_size != expected_world:
                problems.append(f"world_size={t.world_size}, expected {expected_world}")
            for ours, theirs in (("RANK", t.global_rank), ("LOCAL_RANK", t.local_rank), ("NODE_RANK", t.node_rank)):
                if env.get(ours) is not None and int(env[ours]) != theirs:
                    problems.append(f"Lightning's {ours.lower()}={theirs} but the plugin's {ours}={env[ours]}")
            dev = self.device
            # The check the issue asks for: every rank's id, summed by NCCL.
            ids = torch.tensor([float(t.global_rank)], device=dev)
            dist.all_reduce(ids)
            expected_sum = t.world_size * (t.world_size - 1) / 2
            if ids.item() != expected_sum:
                problems.append(f"all-reduce of the rank ids gave {ids.item():g}, expected {expected_sum:g}")
            # Which emulated node each rank is on, to classify NCCL's channels.
            nodes = [torch.zeros(1, dtype=torch.int64, device=dev) for _ in range(t.world_size)]
            dist.all_gather(nodes, torch.tensor([t.node_rank], dtype=torch.int64, device=dev))
            node_of = [int(n.item()) for n in nodes]
            between, inside = collections.Counter(), collections.Counter()
            try:
                with open(own_log, errors="replace") as f:
                    for line in f:
                        m = CHANNEL.search(line)
                        if m:
                            a, b, how = int(m.group(1)), int(m.group(2)), m.group(3)
                            if a < len(node_of) and b < len(node_of):
                                (between if node_of[a] != node_of[b] else inside)[how] += 1
            except OSError as e:
                problems.append(f"no NCCL log at {own_log} ({e})")
            if args.num_nodes > 1 and not args.no_require_net:
                if not between:
                    problems.append("no NCCL channel between emulated nodes in the NCCL log")
                elif any(not k.startswith("NET/") for k in between):
                    problems.append(f"NCCL used {summarize(between)} between emulated nodes, not its network")
            fails = torch.tensor([float(len(problems))], device=dev)
            dist.all_reduce(fails)
            gathered = [None] * t.world_size
            dist.all_gather_object(gathered, {"rank": t.global_rank, "problems": problems,
                                              "between": dict(between), "inside": dict(inside),
                                              "host": env.get("SLURMD_NODENAME"), "hostid": env.get("NCCL_HOSTID"),
                                              "cvd": env.get("CUDA_VISIBLE_DEVICES")})
            if t.global_rank == 0:
                all_between, all_inside = collections.Counter(), collections.Counter()
                for g in gathered:
                    all_between.update(g["between"])
                    all_inside.update(g["inside"])
                    print(f"RANK {g['rank']}: SLURMD_NODENAME={g['host']} NCCL_HOSTID={g['hostid']} "
                          f"CUDA_VISIBLE_DEVICES={g['cvd']}" + ("" if not g["problems"] else
                                                                  " problems: " + "; ".join(g["problems"])),
                          flush=True)
                verdict = "PASS" if fails.item() == 0 else "FAIL"
                print(f"LIGHTNING_FIT {verdict} world={t.world_size} nodes={t.num_nodes} devices={args.devices} "
                      f"sum={ids.item():g} expected={expected_sum:g} master={env.get('MASTER_ADDR')}:"
                      f"{env.get('MASTER_PORT')} between={summarize(all_between)} inside={summarize(all_inside)}",
                      flush=True)
            self.result = fails.item() == 0

    g = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(64 * expected_world, 32, generator=g), torch.randn(64 * expected_world, 1, generator=g))
    trainer = pl.Trainer(accelerator="gpu", devices=args.devices, num_nodes=args.num_nodes, strategy="ddp",
                         max_steps=args.steps, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False)
    model = Probe()
    trainer.fit(model, DataLoader(data, batch_size=8))
    return 0 if model.result else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
