#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
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

# First byte: 0 a --container-env list, 1 a command line ('\n' between
# words), 2 enroot mounts.d text then the path asked for (last line).
for i, s in enumerate(["0MASTER_ADDR,MASTER_PORT", "0HF_TOKEN", "0 RANK , ,WORLD_SIZE,", "0",
                       "1apptainer\nexec\n--nv\n-B\n/data:/data\nimg.sif\ntorchrun\ntrain.py",
                       "1singularity\n--debug\nrun\n--cleanenv\n--env=A=1\nimg.sif",
                       "1/usr/bin/apptainer\nexec\n--\nimg.sif\npython", "1apptainer\nshell\nimg.sif",
                       "2/usr/local/bin/mn-preflight /usr/local/bin/mn-preflight none x-create=file,bind,ro,nosuid,nodev,private\n/usr/local/bin/mn-preflight",
                       "2# comment /x /usr/bin/mn-preflight\n\t/a\t/usr/bin/mn-preflight none bind\n/usr/bin/mn-preflight",
                       "2${ENROOT_ROOTFS}/x /y\n/y"]):
    put("containers", str(i), s)

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
# The clouds (fuzz_sysfs.cc): after the two ports, each HCA's driver link,
# DMI product_name, chassis_asset_tag, the gVNIC count, then operstate,
# speed and mtu per gVNIC, as the fixture trees of make-sysfs.sh have them.
efa = ["4: ACTIVE", "5: LinkUp", "Unknown", "100 Gb/sec (4X EDR)"] + ["-"] * 9
oci_rdma = roce[:6] + ["rdma0"] + roce[7:9] + ["rdma0", "rdma0", "up", "4220"]
oci_front = roce[:6] + ["eth0"] + roce[7:9] + ["eth0", "eth0", "up", "9000"]
none = ["-"] * 13
clouds = {
    "efa-p4d": (efa, efa, ["efa", "efa", "p4d.24xlarge", "Amazon EC2", "0"]),
    "efa-unknown-type": (efa, efa, ["efa", "-", "-", "-", "0"]),
    "oci-h100": (oci_rdma, oci_front, ["mlx5_core", "mlx5_core", "BM.GPU.H100.8", "OracleCloud.com", "0"]),
    "a3-high": (none, none, ["-", "-", "a3-highgpu-8g", "Google", "5"] + ["up", "200000", "8244"] * 5),
    "a3-high-nic-down": (none, none, ["-", "-", "-", "-", "5"] + ["up", "200000", "8244"] * 3 + ["down", "-1", "8244"] +
                         ["up", "200000", "8244"]),
    "a3-mega": (none, none, ["-", "-", "a3-megagpu-8g", "Google", "9"] + ["up", "200000", "8244"] * 9),
    "a3-mega-with-ib": (ib, ib_slow, ["mlx5_core", "mlx5_core", "-", "-", "9"] + ["up", "200000", "8244"] * 9),
    "gvnics-not-a3": (roce, roce_gid0, ["-", "-", "-", "-", "3"] + ["up", "100000", "1460"] * 3),
}
for name, (a, b, c) in clouds.items():
    put("sysfs", "cloud-" + name, "|".join(a + b + c))


class Bytes:
    """A CBOR byte string (a nested message), not a text."""
    def __init__(self, b):
        self.b = b


def cbor(v):
    """CBOR (RFC 8949) as helper/check/messages writes its JSON: null, bools,
    whole numbers, doubles, texts (str, or bytes kept as they are), lists,
    maps in key order."""
    def head(major, n):
        if n < 24:
            return bytes([major << 5 | n])
        size = next(s for s in (1, 2, 4, 8) if n < 1 << (8 * s))
        return bytes([major << 5 | {1: 24, 2: 25, 4: 26, 8: 27}[size]]) + n.to_bytes(size, "big")
    if v is None or isinstance(v, bool):
        return {None: b"\xf6", True: b"\xf5", False: b"\xf4"}[v]
    if isinstance(v, int):
        return head(0, v) if v >= 0 else head(1, -1 - v)
    if isinstance(v, float):
        return b"\xfb" + struct.pack(">d", v)
    if isinstance(v, Bytes):
        return head(2, len(v.b)) + v.b
    if isinstance(v, (str, bytes)):
        b = v.encode() if isinstance(v, str) else v
        return head(3, len(b)) + b
    if isinstance(v, list):
        return head(4, len(v)) + b"".join(cbor(x) for x in v)
    return head(5, len(v)) + b"".join(cbor(k) + cbor(v[k]) for k in sorted(v))


def frame(body):
    """helper/wire's framing: 4-byte length, then the body."""
    body = cbor(body) if isinstance(body, dict) else body
    return struct.pack(">I", len(body)) + body


# Every message as mn-preflight sends it (helper/check/messages.cc): its
# name, then its fields.
sig = {"fabric": "socket", "hcas": "", "rate_gbps": 0.0, "mtu": 1500}
hello = {"rank": 1, "node": 1, "label": "node1", "slurm_node": "node1", "host": "node1", "pid": 4242,
         "gpu_ok": False, "gpu_why": "no CUDA driver (libcuda.so.1 not found)", "gpus": 0, "lanes": 1,
         "lane_gpus": [], "data_addr": "10.250.0.11", "data_port": 41234, "standby_port": 41240, "sig": sig,
         "ifname": "eth0", "problems": []}
gpu_hello = dict(hello, gpu_ok=True, gpu_why="", gpus=8, lanes=2, lane_gpus=["GPU0 (0000:19:00.0)", "GPU1 (0000:3b:00.0)"],
                 sig={"fabric": "ib", "hcas": "mlx5_0:1,mlx5_1:1", "rate_gbps": 400.0, "mtu": 4096},
                 problems=["mlx5_2:1 DOWN", "a | b\nc", b"\xff\x00 bytes"])
cpu_plan = {"gpu": False, "bytes": 4194304, "iters": 5, "warmup": 5, "budget": 2.0, "pair_budget": 0.4,
            "pair_bytes": 1048576, "nranks": 3, "first_rank": 0, "id": "", "next_addr": "10.250.0.12",
            "next_port": 41235, "leader": 8, "members": [9, 10, 11, 12, 13, 14, 15], "ring_pos": 1, "ring_size": 32,
            "prev": 0, "next": 16, "colors": []}
gpu_plan = dict(cpu_plan, gpu=True, bytes=67108864, iters=20, nranks=4, first_rank=2, members=[], id="f" * 256,
                colors=[[0, 0], [-1, 1], [1000, 1000]])
gpu = {"gpu": "GPU0 (0000:19:00.0)", "nvml": True, "nvml_error": "",
       "processes": [{"pid": 4242, "name": "mn-preflight", "used_mib": 512}], "ecc_uncorrected": 0,
       "retirement_pending": None, "remap_pending": False, "remap_failed": False, "pcie_gen": 4, "pcie_gen_max": 4,
       "pcie_width": 16, "pcie_width_max": 16, "nvlinks": 18, "nvlinks_up": 18, "hw_slowdown": False,
       "hw_thermal": False, "sw_thermal": False, "power_brake": False}
result_cpu = {"ran": True, "correct": True, "error": "", "kind": "none", "seconds": 0.0123, "init": 0.0,
              "passes": 4.5, "transports": [], "pair_seconds": [], "pair_error": ""}
result_gpu = dict(result_cpu, seconds=0.00042, init=1.25, passes=None, transports=["NET/IB", "P2P/CUMEM"],
                  pair_seconds=[[0.001, 0.0011], [-1.0, 0.002]])
knock = {"version": 3, "purpose": "control", "rank": 1, "nonce": "cd" * 16}
messages = {
    "hello": {"Hello": hello}, "hello-gpu": {"Hello": gpu_hello},
    "prepare": {"Prepare": {"gpu": False, "bytes": 4194304, "nranks": 0, "first_rank": 0, "id": "", "nccl": ""}},
    "plan": {"Plan": cpu_plan}, "plan-gpu": {"Plan": gpu_plan},
    "pair-cue": {"PairCue": {"tag": "pair:0:0", "peer": 1, "peer_addr": "10.250.0.11", "peer_port": 41236,
                             "connect": True, "bytes": 1048576, "iters": 3, "budget": 4.5, "time_bound": 0.4}},
    "done": {"Word": {"done": True, "code": 0, "why": "check failed"}},
    "stop": {"Word": {"done": False, "code": 1, "why": "node1: rank 1: set-up failed\nsecond line"}},
    "ready": {"Ready": {"error": "", "health": [gpu],
                        "fingerprint": "host=node1 nccl=2.28.9 nccl_path=/usr/lib/x86_64-linux-gnu/libnccl.so.2 "
                                       "cuda=12.8 gpu_model=NVIDIA%20H100%2080GB%20HBM3 gpus=8 gpus_requested=8"}},
    "ready-fault": {"Ready": {"error": "GPU1 (0000:3b:00.0): cudaMalloc failed", "health": [], "fingerprint": ""}},
    "result": {"Result": result_cpu}, "result-gpu": {"Result": result_gpu},
    "result-peer": {"Result": dict(result_cpu, ran=False, correct=False, kind="peer",
                                   error="ring from rank 2 to rank 1: \\ x")},
    "pair-report": {"PairReport": {"tag": "pair:0:0", "seconds": 0.0042, "error": "", "strangers": 0,
                                   "strangers_seen": ""}},
    "pair-report-strangers": {"PairReport": {"tag": "retest:1:0", "seconds": 0.0176, "error": "", "strangers": 12,
                                             "strangers_seen": "12 connections from 10.250.0.11 (8 held a connection "
                                                               "without a word, 4 waited at it while it was not "
                                                               "accepting)"}},
    "gpu-retest": {"GpuRetest": {"colors": [[0, 0], [-1, -1], [1, -1]]}},
    "gpu-retest-report": {"GpuRetestReport": {"seconds": [[0.0021, 0.0022], [-1.0, -1.0], [0.0019, -1.0]], "error": ""}},
    "knock": {"Knock": dict(knock, purpose="data:ring", rank=2, nonce="ab" * 16)},
    "welcome": {"Welcome": {"rank": 0}}, "refused": {"Refused": {"reason": "secret"}},
    # Liveness and takeover (helper/check/liveness.cc, takeover.cc).
    "beat": {"Beat": {"stage": "collective"}},
    "roster": {"Roster": {"lead": dict(hello, rank=0, node=0, label="node0", data_addr="10.250.0.10"),
                          "standbys": [{"rank": 1, "label": "node1", "addr": "10.250.0.11", "port": 41240}]}},
    "superseded": {"Superseded": {"by": 1, "by_label": "node1", "code": 1}},
    "takeover": {"TakeoverReport": {"hello": hello}},
    # Through a node's leader (helper/check/node.cc): nested bodies as CBOR byte strings.
    "relay": {"Relay": {"parts": [{"to": [8, 9, 10], "body": Bytes(cbor({"Prepare": {"gpu": False, "bytes": 4194304,
                                                                                      "nranks": 0, "first_rank": 0,
                                                                                      "id": "", "nccl": ""}}))},
                                  {"to": [11], "body": Bytes(cbor({"Plan": cpu_plan}))}]}},
    "relayed": {"Relayed": {"parts": [{"rank": 9, "what": "hello", "body": Bytes(cbor({"Hello": dict(hello, rank=9)})),
                                       "error": "", "silent": False},
                                      {"rank": 10, "what": "said", "body": Bytes(cbor({"Result": result_cpu})),
                                       "error": "", "silent": False},
                                      {"rank": 11, "what": "gone", "body": Bytes(b""),
                                       "error": "nothing heard from it for 3 s", "silent": True}]}},
    # What the decoders refuse: out of range, of another type, missing, a word not of the set.
    "port-out-of-range": {"Hello": dict(hello, data_port=70000)},
    "negative-rank": {"Roster": {"lead": dict(hello, rank=-1), "standbys": []}},
    "real-for-whole": {"Plan": dict(cpu_plan, bytes=12.5)},
    "missing-field": {"Prepare": {"gpu": True}},
    "unknown-stage": {"Beat": {"stage": "lunch"}},
}
for name, body in messages.items():
    put("wire", name, frame(body))
challenge = b"op=challenge\nv=6\nnonce=9f86d081884c7d659a2feaa0c55ad015\n"
for name, data in {"challenge": frame(challenge),
                   "challenge-v2": frame(b"nonce=9f86d081884c7d659a2feaa0c55ad015\nop=challenge\nv=2\n"),
                   "v2-hello": frame(b"data_port=41234\nlabel=node1\nop=hello\nrank=1\n"),
                   "http-probe": b"GET / HTTP/1.1\r\nHost: node0\r\n\r\n", "short": b"\x00\x00\x01",
                   "deep": frame(b"\xa1\x65Hello" + b"\x81" * 64),
                   "huge-length": frame(b"\xa1\x65Hello\xbb\x7f\xff\xff\xff\xff\xff\xff\xff"),
                   "two-frames": frame(challenge) + frame({"Hello": dict(hello, rank=2)})}.items():
    put("wire", name, data)

# The handshake (helper/check/doorway): a knock sealed as a rank would seal
# it under this secret and challenge nonce, with its hello; protocol 1's
# hello; a knock without its MAC; a stranger's probe.
secret = "4f3c2b1a09f8e7d6c5b4a39281706f5e"
nonce = "9f86d081884c7d659a2feaa0c55ad015"
def sealed(key, seq, body):
    body = cbor(body)
    mac = hmac.new(key, b"c" + struct.pack(">Q", seq) + body, hashlib.sha256).digest()
    return struct.pack(">I", len(body) + 32) + body + mac
key = hmac.new(secret.encode(), f"mn-preflight/3\ncontrol\n1\n{nonce}\n{'cd' * 16}".encode(), hashlib.sha256).digest()
for name, data in {"knock-hello": sealed(key, 0, {"Knock": knock}) + sealed(key, 1, {"Hello": hello}),
                   "knock": sealed(key, 0, {"Knock": knock}),
                   "old-hello": frame(b"data_port=41234\nop=hello\nproof=" + b"ab" * 32 + b"\nrank=1\n"),
                   "knock-no-mac": frame({"Knock": knock}), "probe": b"SSH-2.0-OpenSSH_9.2\r\n"}.items():
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
# /proc/net/tcp (Linux 6.1, the local cluster, a gloo loop): node0 while
# node1's link is down (retransmitting to it), node1 itself (its data
# probed behind its interface that is down), and an idle table.
tcp_head = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
put("proc_net_tcp", "peer-down", tcp_head +
    "   2: 0A00FA0A:9F69 0B00FA0A:DBE4 01 00000060:00000000 01:00000034 00000002     0        0 25339762 2 "
    "000000007fd2e7b3 81 4 1 1 -1\n"
    "   3: 0A00FA0A:C4EC 0100FA0A:A495 01 00000000:00000000 00:00000000 00000000     0        0 25338539 1 "
    "00000000bcd40378 20 4 30 12 -1\n")
put("proc_net_tcp", "own-down", tcp_head +
    "   1: 0B00FA0A:A46B 0C00FA0A:C9D4 01 00000060:00000000 04:0000002D 00000000     0        2 25339764 2 "
    "000000002b760a02 20 4 1 106 -1\n"
    "   2: 0B00FA0A:DBE4 0A00FA0A:9F69 01 00000060:00000000 04:0000002D 00000000     0        2 25338771 2 "
    "00000000cd74faa2 20 4 1 386 148\n")
put("proc_net_tcp", "idle", tcp_head +
    "   0: 0100007F:0CEA 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 27633 1 "
    "0000000000000000 100 0 0 10 0\n")
# An RDMA port's counters look after look (state|ranks wait|port_rcv_packets|
# local_ack_timeout_err|link errors): silent while its senders time out,
# garbled, carrying (packets in), a pause, saturated, and going DOWN.
def port_looks(rows):
    return "".join("|".join(r) + "\n" for r in rows)
put("rdma_port", "silent", port_looks([("4: ACTIVE", "1", "1000\n", str(7 + i) + "\n", "2\n") for i in range(9)]))
put("rdma_port", "garbled", port_looks([("4: ACTIVE", "1", "1000", "7", str(2 + 9 * i)) for i in range(9)]))
put("rdma_port", "carrying", port_looks([("4: ACTIVE", "1", str(1000 + i), str(7 + 3 * i), "2") for i in range(9)]))
put("rdma_port", "pause", port_looks([("4: ACTIVE", "0", "1000", str(7 + 3 * i), "2") for i in range(9)]))
put("rdma_port", "saturated", port_looks([("4: ACTIVE", "1", "4294967295", str(7 + 3 * i), "") for i in range(9)]))
put("rdma_port", "down", port_looks([("4: ACTIVE" if i < 2 else "1: DOWN", "1", "1000", "7", "2") for i in range(9)]))
# PyTorch's Flight Recorder dumps (torch 2.11, NCCL 2.28.9, the device
# tool's H100): rank 0's asked for through its pipe while both ranks ran,
# and while rank 1 was stopped (entries cut, re-pickled by Python's own
# pickler); a small one of each opcode the reader takes.
fixtures = os.path.join(here, "..", "fixtures", "flight_record")
for name in ("healthy_rank0", "waiting_rank0"):
    with open(os.path.join(fixtures, name + ".pickle"), "rb") as f:
        put("flight_record", name, f.read())
def pickled_text(t, short=False):
    b = t.encode()
    return (b"\x8c" + bytes([len(b)]) if short else b"X" + struct.pack("<I", len(b))) + b


put("flight_record", "opcodes", b"\x80\x02}q\x00(" + pickled_text("pg_status") + b"}(" + pickled_text("0", True) + b"}(" +
    pickled_text("last_enqueued_collective") + b"K\x05" + pickled_text("last_completed_collective") + b"M\x04\x00" +
    b"uu" + pickled_text("entries") + b"](}(" + pickled_text("pg_id") + b"J\x00\x00\x00\x00" + pickled_text("state") +
    pickled_text("scheduled") + b"q\x01" + pickled_text("collective_seq_id") + b"\x8a\x01\x05" + pickled_text("f") +
    b"G?\xf0\x00\x00\x00\x00\x00\x00" + pickled_text("t") + b")\x85\x88\x89\x87" + pickled_text("n") + b"N" +
    pickled_text("again") + b"h\x01" + b"ueu.")
# NCCL's RAS reports (tests/fixtures/nccl_ras: a rank missing, a healthy job).
for name in ("missing_rank", "healthy"):
    with open(os.path.join(here, "..", "fixtures", "nccl_ras", name + ".txt"), "rb") as f:
        put("nccl_ras", name, f.read())
print("seeds written under", corpus)
