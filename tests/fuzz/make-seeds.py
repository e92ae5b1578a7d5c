#!/usr/bin/env python3
"""Writes the seed corpora of tests/fuzz (real examples of each input), named
seed-*, next to the finds that scripts/test/fuzz.sh --long merges in.
   tests/fuzz/make-seeds.py            (run from anywhere)"""
import hashlib, hmac, os, struct, subprocess, sys, tempfile

here = os.path.dirname(os.path.abspath(__file__))
corpus = os.path.join(here, "corpus")


def put(target, name, data):
    d = os.path.join(corpus, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)


for i, s in enumerate(["node[01-04,07],login1", "gpu-a[1,3-5]-ib", "node1", "n[0-2]", "node[8-10]",
                       "rack[1-2]-gpu[01-02]", "node[001-128]", "node1,node2,node3", "mn-node[0-1]",
                       "dgx-h100-[000-003]"]):
    put("hostlist", str(i), s)

for i, s in enumerate(["2(x3),1", "4", "1(x2)", "8(x16),4,2(x2)", "1", "1,2,3", "0(x2)", "4(x128)"]):
    put("tasks_per_node", str(i), s)

# First byte of a line: 0 mode, 1 launch, 2 emulate-nodes, 3 MASTER_PORT,
# 4 port_range, 5 GPU list; every line is also a plugstack.conf argument.
opts = [
    "0auto\n0IB\n0off\n1task\n1node\n2 2\n22\n34242\n420000-29999\n50,1,2,3",
    "0default=roce\n4port_range=20000-29999\n1force=1\n5sysfs_root=/var/lib/mn-nccl/sys",
    "0default=off\n4port_range=30000-30015\n1force=0",
    "0\n0Socket\n24096\n365535\n51024-65535\n5NoDevFiles",
    "5GPU-6f1e2a3b-0c4d-5e6f-7a8b-9c0d1e2f3a4b,GPU-1a2b3c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d",
    "0default=bogus\n4port_range=99-1\n1force=yes\n5sysfs_root=relative\n0typo=1",
]
for i, s in enumerate(opts):
    put("options", str(i), s)

# sysfs: 13 files per port, '|' between: state, phys_state, link_layer, rate,
# gid 0, its type, its netdev, gid 3, its type, its netdev, netdev, operstate, mtu.
ib = ["4: ACTIVE", "5: LinkUp", "InfiniBand", "400 Gb/sec (4X NDR)",
      "fe80:0000:0000:0000:0a6e:d2ff:fe3b:4c51", "-", "-", "-", "-", "-", "ibp0s0", "up", "4092"]
ib_slow = ["4: ACTIVE", "5: LinkUp", "-", "200 Gb/sec (4X HDR)",
           "fe80:0000:0000:0000:0a6e:d2ff:fe3b:4c52", "-", "-", "-", "-", "-", "ibp1s0", "up", "4092"]
ib_down = ["1: DOWN", "3: Disabled", "InfiniBand", "10 Gb/sec (4X SDR)", "-", "-", "-", "-", "-", "-", "-", "-", "-"]
roce = ["4: ACTIVE", "5: LinkUp", "Ethernet", "100 Gb/sec (4X EDR)",
        "fe80:0000:0000:0000:0a6e:d2ff:fe3b:4c5a", "IB/RoCE v1", "ens0f0",
        "0000:0000:0000:0000:0000:ffff:0a00:0101", "RoCE v2", "ens0f0", "ens0f0", "up", "9000"]
roce_v1 = roce[:8] + ["IB/RoCE v1"] + roce[9:]
roce_down = roce[:11] + ["down", "1500"]
roce_gid0 = roce[:4] + ["0000:0000:0000:0000:0000:ffff:0a00:0102", "RoCE v2", "ens1f0"] + roce[7:10] + ["ens1f0", "up", "9000"]
garbled = ["ACTIVE", "LinkUp", "Ethernet", "fast", "zz", "RoCE v2", "../..", "-", "-", "-", "..", "up", "x"]
for name, (a, b) in {"ib-two-rates": (ib, ib_slow), "ib-and-down": (ib, ib_down), "roce": (roce, roce_gid0),
                     "roce-v1-only": (roce_v1, roce_down), "ib-and-roce": (ib, roce), "garbled": (garbled, ib_down),
                     "missing": (["-"] * 13, ["-"] * 13)}.items():
    put("sysfs", name, "|".join(a + b))


def escape(v):
    return v.replace("\\", "\\\\").replace("\n", "\\n")


def frame(fields):
    """helper/wire's framing: 4-byte length, key=value lines in key order."""
    body = "".join(f"{k}={escape(v)}\n" for k, v in sorted(fields.items())).encode()
    return struct.pack(">I", len(body)) + body


def items(key, values):
    """helper/check/messages' lists: KEY=count, then KEY.0, KEY.1, ..."""
    out = {key: str(len(values))}
    out.update({f"{key}.{i}": v for i, v in enumerate(values)})
    return out


def nested(key, fields):
    """A message inside another (a roster's hello): its fields under KEY."""
    return {f"{key}.{k}": v for k, v in fields.items() if k != "op"}


# Every message as mn-preflight sends it (helper/check/messages.cc).
hello = {"op": "hello", "rank": "1", "node": "1", "label": "node1", "slurm_node": "node1", "host": "node1",
         "pid": "4242", "gpu_ok": "0", "gpu_why": "no CUDA driver (libcuda.so.1 not found)", "gpus": "0",
         "lanes": "1", "data_addr": "10.250.0.11", "data_port": "41234", "standby_port": "41240",
         "fabric": "socket", "hcas": "",
         "rate": "0", "mtu": "1500", "ifname": "eth0", "proof": "", **items("lane_gpus", []),
         **items("problems", [])}
gpu_hello = dict(hello, gpu_ok="1", gpu_why="", gpus="8", lanes="2", fabric="ib", hcas="mlx5_0:1,mlx5_1:1",
                 rate="400", mtu="4096", **items("lane_gpus", ["GPU0 (0000:19:00.0)", "GPU1 (0000:3b:00.0)"]),
                 **items("problems", ["mlx5_2:1 DOWN", "a | b"]))
cpu_plan = {"op": "plan", "path": "cpu", "bytes": "4194304", "iters": "5", "warmup": "5", "budget": "2",
            "pair_budget": "0.40000000000000002", "pair_bytes": "1048576", "nranks": "3", "first_rank": "0",
            "id": "", "next_addr": "10.250.0.12", "next_port": "41235", "leader": "8",
            "members": "9,10,11,12,13,14,15", "ring_pos": "1", "ring_size": "32", "prev": "0", "next": "16", **items("colors", [])}
gpu_plan = dict(cpu_plan, path="gpu", bytes="67108864", iters="20", nranks="4", first_rank="2", members="",
                id="f" * 256, **items("colors", ["0,0", "-1,1", "1000,1000"]))
health = "\x1f".join(["GPU0 (0000:19:00.0)", "1", "", "4242:512:mn-preflight", "0", "", "0", "0", "4", "4",
                      "16", "16", "18", "18", ""])
result_cpu = {"op": "result", "ran": "1", "correct": "1", "error": "", "kind": "", "seconds": "0.0123",
              "init": "0", "passes": "4.5", "pair_error": "", **items("transports", []),
              **items("pair_seconds", [])}
result_gpu = dict(result_cpu, seconds="0.00042", init="1.25", **items("transports", ["NET/IB", "P2P/CUMEM"]),
                  **items("pair_seconds", ["0.001,0.0011", "-1,0.002"]))
del result_gpu["passes"]
messages = {
    "challenge": {"op": "challenge", "nonce": "9f86d081884c7d659a2feaa0c55ad015"},
    "hello": hello, "hello-gpu": gpu_hello,
    "prepare": {"op": "prepare", "path": "cpu", "bytes": "4194304"},
    "plan": cpu_plan, "plan-gpu": gpu_plan,
    "pair-cue": {"op": "pair_cue", "tag": "pair:0:0", "peer": "1", "peer_addr": "10.250.0.11", "peer_port": "41236",
                 "connect": "1", "bytes": "1048576", "iters": "3", "budget": "4.5", "time_bound": "0.4"},
    "done": {"op": "word", "end": "done", "code": "0", "why": "check failed"},
    "stop": {"op": "word", "end": "stop", "code": "1", "why": "node1: rank 1: set-up failed\nsecond line"},
    "ready": {"op": "ready", "error": "", "health": health,
              "fingerprint": "host=node1 nccl=2.28.9 nccl_path=/usr/lib/x86_64-linux-gnu/libnccl.so.2 cuda=12.8 "
                             "gpu_model=NVIDIA%20H100%2080GB%20HBM3 gpus=8 gpus_requested=8 net= net_api= "
                             "net_path= verbs=mlx5 verbs_needed=mlx5"},
    "ready-fault": {"op": "ready", "error": "GPU1 (0000:3b:00.0): cudaMalloc failed", "health": ""},
    "result": result_cpu, "result-gpu": result_gpu,
    "result-peer": dict(result_cpu, ran="0", correct="0", kind="peer", error="ring from rank 2 to rank 1: \\ x"),
    "pair-report": {"op": "pair_report", "tag": "pair:0:0", "seconds": "0.0042", "error": ""},
    "gpu-retest": {"op": "gpu_retest", **items("colors", ["0,0", "-1,-1", "1,-1"])},
    "gpu-retest-report": {"op": "gpu_retest_report", **items("seconds", ["0.0021,0.0022", "-1,-1", "0.0019,-1"]),
                          "error": ""},
    "knock": {"op": "knock", "v": "2", "purpose": "data:ring", "rank": "2", "nonce": "ab" * 16},
    "welcome": {"op": "welcome", "rank": "0"}, "refused": {"op": "refused", "reason": "secret"},
    "bad-number": dict(cpu_plan, bytes="12x"), "missing-field": {"op": "prepare", "path": "gpu"},
    # Liveness and takeover (helper/check/liveness.cc, takeover.cc).
    "beat": {"op": "beat", "stage": "collective"},
    "roster": {"op": "roster", **nested("lead", dict(hello, rank="0", node="0", label="node0", data_addr="10.250.0.10")),
               **items("standbys", []), "standbys.0.rank": "1", "standbys.0.label": "node1",
               "standbys.0.addr": "10.250.0.11", "standbys.0.port": "41240", "standbys": "1"},
    "superseded": {"op": "superseded", "by": "1", "by_label": "node1", "code": "1"},
    "takeover": {"op": "takeover", **nested("hello", hello)},
}
for name, fields in messages.items():
    put("wire", name, frame(fields))
for name, data in {"http-probe": b"GET / HTTP/1.1\r\nHost: node0\r\n\r\n", "short": b"\x00\x00\x01",
                   "two-frames": frame(messages["challenge"]) + frame({"op": "hello", "rank": "2"})}.items():
    put("wire", name, data)

# The handshake (helper/check/doorway): a knock sealed as a rank would seal
# it under this secret and challenge nonce, with its hello; an old
# protocol's hello; a knock without its MAC; a stranger's probe.
secret = "4f3c2b1a09f8e7d6c5b4a39281706f5e"
nonce = "9f86d081884c7d659a2feaa0c55ad015"
def sealed(key, seq, fields):
    body = b"".join(f"{k}={v}\n".encode() for k, v in sorted(fields.items()))
    mac = hmac.new(key, b"c" + struct.pack(">Q", seq) + body, hashlib.sha256).digest()
    return struct.pack(">I", len(body) + 32) + body + mac
knock = {"op": "knock", "v": "2", "purpose": "control", "rank": "1", "nonce": "cd" * 16}
key = hmac.new(secret.encode(), f"mn-preflight/2\ncontrol\n1\n{nonce}\n{'cd' * 16}".encode(), hashlib.sha256).digest()
for name, data in {"knock-hello": sealed(key, 0, knock) + sealed(key, 1, hello), "knock": sealed(key, 0, knock),
                   "old-hello": frame(dict(hello, proof="ab" * 32)), "knock-no-mac": frame(knock),
                   "probe": b"SSH-2.0-OpenSSH_9.2\r\n"}.items():
    put("handshake", name, secret.encode() + b"\0" + nonce.encode() + b"\0" + data)

nccl = [
    "vm:2841:2841 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM\n",
    "vm:1652:1652 [0] NCCL INFO Channel 00/0 : 1[1] -> 0[0] [receive] via NET/Socket/0\n"
    "vm:1652:1652 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] [send] via NET/Socket/0\n",
    "x:1:1 [0] NCCL INFO Channel 02/0 : 3[3] -> 0[0] [send] via NET/IB/0/GDRDMA\n"
    "x:1:1 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via P2P/direct pointer\n",
    "x:1:1 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct/direct\n",
    "node0:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE ; OOB eth0:10.0.0.1<0>\n"
    "node0:1:1 [0] NCCL INFO Channel 00/1 : 0[0] -> 4[0] [send] via NET/IB/1/GDRDMA/Shared\n",
]
# step: nodelist, tasks per node, --mn-emulate-nodes, --mn-nccl-launch,
# MASTER_ADDR, MASTER_PORT, CUDA_VISIBLE_DEVICES, command, then node id and
# perturbation bytes.
for name, v in {
        "two-nodes": "node[0-1]\n4(x2)\n\n\n\n\n0,1,2,3\npython3 train.py\n\x00\x00",
        "node1": "node[0-1]\n4(x2)\n\n\n\n\n0,1,2,3\npython3 train.py\n\x01\x00",
        "torchrun": "gpu[01-04]\n1(x4)\n\n\n\n\n0,1,2,3,4,5,6,7\ntorchrun --nproc-per-node=8 train.py\n\x02\x00",
        "emulate": "node0\n4\n2\n\n\n\n0,1,2,3\npython3 train.py\n\x00\x00",
        "emulate-node": "node[0-2]\n2(x3)\n2\nnode\n\n\n0,1\ntorchrun train.py\n\x01\x00",
        "user-master": "node[0-1]\n2(x2)\n\ntask\nnode0\n29500\n0,1\npython3 x.py\n\x00\x00",
        "user-ip": "node[0-1]\n2(x2)\n\n\n10.0.0.7\n01234\nNoDevFiles\npython3 x.py\n\x01\x00",
        "disagree": "node[0-3]\n2(x3),1\n\n\n\n\n0\npython3 x.py\n\x03\x02"}.items():
    put("step", name, v.encode("latin1"))

for i, s in enumerate(nccl):
    put("nccl_info", str(i), s)

# hwloc XML: the fixture trees' topology.xml files.
with tempfile.TemporaryDirectory() as t:
    subprocess.run(["bash", os.path.join(here, "..", "fixtures", "make-sysfs.sh"), t], check=True)
    for tree in sorted(os.listdir(t)):
        x = os.path.join(t, tree, "topology.xml")
        if os.path.exists(x):
            put("hwloc_xml", tree, open(x, "rb").read())
put("hwloc_xml", "empty-topology", '<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE topology SYSTEM "hwloc2.dtd">\n'
    '<topology version="2.0">\n  <object type="Machine" os_index="0" cpuset="0x1" complete_cpuset="0x1" '
    'allowed_cpuset="0x1" nodeset="0x1" complete_nodeset="0x1" allowed_nodeset="0x1" gp_index="1">\n'
    '    <object type="PU" os_index="0" cpuset="0x1" complete_cpuset="0x1" gp_index="2"/>\n  </object>\n</topology>\n')
print("seeds written under", corpus)
