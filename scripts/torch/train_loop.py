# SPDX-License-Identifier: Apache-2.0
"""A training loop as the hang watch sees one: all-reduces of 1 MiB from the
environment mn_nccl set, STEPS of them, one every SLEEP seconds (0.1).
BACKEND=nccl (GPU machines): on the GPU LOCAL_RANK selects, with the
process group's time-out PG_TIMEOUT seconds (torch's default otherwise);
else gloo on the CPU. Each rank writes
its pid to $MN_WATCH_PIDS/pid.RANK once it is in the loop (for the test that
stops or kills it). With PAUSE_AT=K PAUSE=S PAUSE_RANKS=all|0, the named
ranks sleep S seconds before step K (a checkpoint save by all, or by rank 0
alone while the others wait in the next all-reduce); PAUSE_WORK=busy has
them write a file over and over meanwhile, as a checkpoint's writer is busy.
With FAULT=skip|other|kernel FAULT_AT=K FAULT_RANK=R (1), rank R at step K:
  skip    does not call all-reduce K and waits (sleeps) for ever, as a rank
          that took another path and waits on something else
  other   calls a 4-byte all-reduce in its place, then waits for ever
  kernel  starts a GPU kernel that never ends (torch.cuda._sleep), then
          goes on: its all-reduce K queues behind the kernel (on the CPU
          with RECORDER=1: all-reduce K is recorded scheduled and never
          starts, as it would be behind such a kernel)
  fabric  (every rank, with RECORDER=1) all-reduce K is recorded started
          and never completes, as when the fabric carries nothing: the
          ranks all wait in it for ever
and prints FAULT rank=R step=K at=EPOCH_SECONDS. RECORDER=1 keeps a
Flight Recorder of its own for a torch without one (Debian's 1.13, gloo):
each all-reduce an entry as torch 2.x records it (scheduled, started while
gloo runs it, completed), and torch's dump pipe served as torch serves it
(a FIFO at $TORCH_NCCL_DEBUG_INFO_PIPE_FILE<rank>.pipe; each line read
there writes the dump, a protocol-2 pickle of torch's format 2.10, to
$TORCH_NCCL_DEBUG_INFO_TEMP_FILE<rank>). The GPU machines run torch's own.
FR_DEAF=1 (with RECORDER=1): at its fault the rank dumps of its own and
reads its pipe no more, as torch's watchdog does after an NCCL error.
RAS_STANDIN=FILE has rank 0 answer at $NCCL_RAS_ADDR with FILE, as
NCCL's RAS would (a CPU run has none). Prints
  WATCHED rank=R fr_buffer=N watch_dir=D dir_mode=0700
  RAS_ADDR rank=R addr=NCCL_RAS_ADDR
at the start and DONE rank=R steps=N seconds=S (the loop's time) at the end.
"""
import os
import pickle
import select
import sys
import datetime
import threading
import time

import torch
import torch.distributed as dist


class Recorder:
    """The Flight Recorder's bookkeeping and dump pipe, for one group."""

    def __init__(self, rank, world):
        self.rank = rank
        self.lock = threading.Lock()
        self.entries = []
        self.status = {"last_enqueued_collective": -1, "last_started_collective": -1,
                       "last_completed_collective": -1}
        self.config = {"0": {"name": "0", "desc": "default_pg", "ranks": str(list(range(world)))}}
        self.seq = 0
        pipe = os.environ.get("TORCH_NCCL_DEBUG_INFO_PIPE_FILE")
        self.dump_to = os.environ.get("TORCH_NCCL_DEBUG_INFO_TEMP_FILE", "/tmp/fr_rank_") + str(rank)
        if pipe:
            path = f"{pipe}{rank}.pipe"
            os.mkfifo(path, 0o600)
            # Read and write: the FIFO never reads as ended between askers.
            fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)
            threading.Thread(target=self.serve, args=(fd,), daemon=True).start()

    # FR_DEAF=1: at its fault the rank dumps of its own and reads its pipe
    # no more, as torch's watchdog does on an error or a time-out.
    deaf = False

    def serve(self, fd):
        while not self.deaf:
            select.select([fd], [], [], 0.5)
            if self.deaf:
                break
            try:
                if os.read(fd, 4096):
                    self.dump()
            except BlockingIOError:
                pass

    def dump(self):
        with self.lock:
            d = {"version": "2.10", "comm_lib_version": "gloo", "pg_config": self.config,
                 "pg_status": {"0": dict(self.status)}, "entries": [dict(e) for e in self.entries[-2000:]]}
        with open(self.dump_to, "wb") as f:
            pickle.dump(d, f, protocol=2)

    # FAULT=kernel on the CPU: the next all-reduce is enqueued and never
    # starts, as on a GPU whose stream holds it behind a kernel that does
    # not end (torch records it "scheduled").
    stuck = False
    # FAULT=fabric: the next all-reduce starts and never completes.
    wedged = False

    def all_reduce(self, t):
        with self.lock:
            self.seq += 1
            e = {"record_id": self.seq - 1, "pg_id": 0, "process_group": ("0", "default_pg"),
                 "collective_seq_id": self.seq, "profiling_name": "gloo:all_reduce",
                 "input_sizes": [list(t.shape)], "input_dtypes": ["Float"],
                 "state": "scheduled" if self.stuck else "started"}
            self.entries.append(e)
            if len(self.entries) > 4000:
                del self.entries[:2000]
            self.status["last_enqueued_collective"] = self.seq
            if not self.stuck:
                self.status["last_started_collective"] = self.seq
        if self.stuck or self.wedged:
            time.sleep(10**6)
        dist.all_reduce(t)
        with self.lock:
            e["state"] = "completed"
            self.status["last_completed_collective"] = self.seq


def serve_ras(path, asked_dir):
    """RAS_STANDIN=FILE (a CPU run has no NCCL): rank 0 answers at
    $NCCL_RAS_ADDR as NCCL's RAS thread does, with FILE's report, once per
    connection (each noted in $MN_WATCH_PIDS/ras_asked)."""
    import socket
    host, port = os.environ["NCCL_RAS_ADDR"].rsplit(":", 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host, int(port)))
    s.listen(4)

    def loop():
        while True:
            c, _ = s.accept()
            c.settimeout(5)
            got = b""
            while b"STATUS" not in got.upper():
                b = c.recv(4096)
                if not b:
                    break
                got += b
            if asked_dir:
                with open(os.path.join(asked_dir, "ras_asked"), "a") as f:
                    f.write(got.decode(errors="replace").replace("\n", "|") + "\n")
            with open(path, "rb") as f:
                c.sendall(b"SERVER PROTOCOL 2\nOK\n" + f.read())
            c.close()
    threading.Thread(target=loop, daemon=True).start()


def main():
    backend = os.environ.get("BACKEND", "gloo")
    kw = {}
    if os.environ.get("PG_TIMEOUT"):
        kw["timeout"] = datetime.timedelta(seconds=float(os.environ["PG_TIMEOUT"]))
    device = "cpu"
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        device = "cuda"
    dist.init_process_group(backend, init_method="env://", **kw)
    rank = dist.get_rank()
    pause_each = float(os.environ.get("SLEEP", "0.1"))
    steps = int(os.environ.get("STEPS", "50"))
    pause_at = int(os.environ.get("PAUSE_AT", "-1"))
    pause = float(os.environ.get("PAUSE", "0"))
    who = os.environ.get("PAUSE_RANKS", "all")
    busy = os.environ.get("PAUSE_WORK", "sleep") == "busy"
    fault = os.environ.get("FAULT", "")
    fault_at = int(os.environ.get("FAULT_AT", "-1"))
    faulty = fault and (fault == "fabric" or rank == int(os.environ.get("FAULT_RANK", "1")))
    d = os.environ.get("MN_NCCL_WATCH_DIR", "")
    mode = oct(os.stat(d).st_mode & 0o777) if d else "-"
    print(f"WATCHED rank={rank} fr_buffer={os.environ.get('TORCH_FR_BUFFER_SIZE', '-')} watch_dir={d} "
          f"dir_mode={mode}", flush=True)
    print(f"RAS_ADDR rank={rank} addr={os.environ.get('NCCL_RAS_ADDR', '-')}", flush=True)
    if rank == 0 and os.environ.get("RAS_STANDIN"):
        serve_ras(os.environ["RAS_STANDIN"], os.environ.get("MN_WATCH_PIDS"))
    pids = os.environ.get("MN_WATCH_PIDS")
    if pids:
        with open(f"{pids}/pid.{rank}", "w") as f:
            f.write(str(os.getpid()))
    all_reduce = dist.all_reduce
    recorder = None
    if os.environ.get("RECORDER") == "1":
        recorder = Recorder(rank, dist.get_world_size())
        all_reduce = recorder.all_reduce
    t = torch.ones(256 * 1024, device=device)
    all_reduce(t)
    if device == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for i in range(steps):
        if i == pause_at and (who == "all" or str(rank) == who):
            if busy:
                end = time.monotonic() + pause
                blob = os.urandom(1 << 20)
                path = os.path.join(d or "/tmp", f"checkpoint.{rank}")
                while time.monotonic() < end:
                    with open(path, "wb") as f:
                        for _ in range(16):
                            f.write(blob)
                os.unlink(path)
            else:
                time.sleep(pause)
        if faulty and i == fault_at:
            print(f"FAULT rank={rank} step={i} at={time.time():.3f} {fault}", flush=True)
            if recorder and os.environ.get("FR_DEAF") == "1":
                recorder.deaf = True
                recorder.dump()
            if fault == "skip":
                time.sleep(10**6)
            elif fault == "other":
                all_reduce(torch.ones(1, device=device))
                time.sleep(10**6)
            elif fault == "kernel" and device == "cuda":
                torch.cuda._sleep(1 << 62)
            elif fault == "kernel" and recorder:
                recorder.stuck = True
            elif fault == "fabric" and recorder:
                recorder.wedged = True
        all_reduce(t)
        t.fill_(1.0)
        if pause_each > 0:
            time.sleep(pause_each)
    if device == "cuda":
        torch.cuda.synchronize()
    secs = time.perf_counter() - t0
    dist.barrier()
    print(f"DONE rank={rank} steps={steps} seconds={secs:.4f}", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
