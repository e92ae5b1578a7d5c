#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Every node alike, and remembered (issue 21), on the real local Slurm: one
# node given another NCCL (a stub library of another release, through
# MN_PREFLIGHT_NCCL) is named alone with what differs; the verdicts go to
# --history and --metrics-dir and read back through `mn-preflight history`
# and a parser of Prometheus' text format; --prolog writes the same, 20 of
# them at once into one file with nothing lost or torn.
source "$(dirname "$0")/lib.sh"
PF=$TOP/helper/mn-preflight
plugstack required
OLD=$TOP/tests/fixtures/nccl-2.18.5/libnccl.so
NEW=$TOP/tests/fixtures/nccl-2.21.5/libnccl.so
HIST=$OUT/history
# node_exporter's textfile directory exists before any check writes there
# (the history directory is made when missing).
METRICS=$OUT/metrics
mkdir -p "$METRICS" "$OUT/prolog/metrics"

# The check with node2 on NCCL 2.18.5 and the others on 2.21.5.
odd_check() {
  run srun -N3 --ntasks-per-node=1 --mn-nccl bash -c \
    "if [ \$SLURMD_NODENAME = node2 ]; then export MN_PREFLIGHT_NCCL=$OLD; else export MN_PREFLIGHT_NCCL=$NEW; fi; exec $PF --no-pairs --history $HIST --metrics-dir $METRICS"
}

t_a_odd_nccl_named_alone() {
  local name="node2 on NCCL 2.18.5, the others on 2.21.5: FAIL before the all-reduce, node2 named with both releases, nobody else"
  [ -f "$OLD" ] && [ -f "$NEW" ] || { fail "$name" "the stub NCCLs are not built (make check builds them)"; return; }
  odd_check
  grep -E '^(node[0-2] |problem|FAIL|PASS)' "$OUT/last" | sed 's/^/    /'
  [ $RC -eq 1 ] && grep -qE "^node2 .*fingerprint: NCCL 2\.18\.5 \($OLD\), the others 2\.21\.5" "$OUT/last" &&
    grep -qE '^node0 .* ok$' "$OUT/last" && grep -qE '^node1 .* ok$' "$OUT/last" && ! has '^problem: node[01]' ||
    { fail "$name" "rc=$RC"; return; }
  pass "$name"
}

t_b_history_read_back() {
  local name="--history: one line per node per check; mn-preflight history counts them, names node2's kind and drains it at 2 of 2"
  odd_check
  local lines; lines=$(cat "$HIST"/*.jsonl 2>/dev/null | wc -l)
  run "$PF" history "$HIST" --drain 2/2 --json
  local got
  got=$(python3 -c '
import json, sys
d = json.loads(open(sys.argv[1]).read())
nodes = {n["node"]: n for n in d["nodes"]}
print(len(nodes), nodes["node2"]["checks"], nodes["node2"]["failures_by_kind"].get("fingerprint", 0),
      nodes["node0"]["failures"], ",".join(d["drain_candidates"]))' "$OUT/last" 2>&1)
  run "$PF" history "$HIST"
  sed 's/^/    /' "$OUT/last" | head -6
  [ "$lines" = 6 ] && [ "$got" = "3 2 2 0 node2" ] && has '^node2 ' || { fail "$name" "lines=$lines got=$got"; return; }
  pass "$name"
}

t_c_history_damage_is_a_warning() {
  local name="a torn line and a line of a newer version in the history: warnings naming file and line, the rest still counted"
  printf '{"v":1,"job":"1","st\n{"v":9,"job":"2"}\n' >>"$HIST/node1.jsonl"
  run "$PF" history "$HIST"
  [ $RC -eq 0 ] && has "node1.jsonl line 3" && has "node1.jsonl line 4" && has '^node1 ' ||
    { fail "$name" "rc=$RC"; return; }
  pass "$name"
}

t_d_metrics_parsed() {
  local name="--metrics-dir: one .prom file per node, parsed back: node2's last verdict is fingerprint, node0's ok"
  local got
  got=$(python3 - "$METRICS" <<'PY' 2>&1
import os, re, sys
d = sys.argv[1]
sample = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})? (\S+)$')
out = []
for node in ("node0", "node2"):
    path = os.path.join(d, "mn_preflight_%s.prom" % node)
    kinds = {}
    typed = set()
    for line in open(path):
        line = line.rstrip("\n")
        if line.startswith("# TYPE "):
            typed.add(line.split()[2])
            continue
        if not line or line.startswith("#"):
            continue
        m = sample.match(line)
        if not m:
            raise SystemExit("not a sample: %r" % line)
        labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
        if m.group(1) not in typed:
            raise SystemExit("sample before its TYPE: %r" % line)
        if m.group(1) == "mn_preflight_last_verdict":
            kinds[labels["kind"]] = float(m.group(4))
    out.append("%s=%s" % (node, ",".join(k for k, v in sorted(kinds.items()) if v == 1)))
print(" ".join(out))
PY
)
  local promtool=""
  if command -v promtool >/dev/null; then
    promtool check metrics <"$METRICS/mn_preflight_node2.prom" >"$OUT/last" 2>&1 && promtool=" promtool: ok" || promtool=" promtool: FAILED"
  fi
  [ "$got" = "node0=ok node2=fingerprint" ] && [ "$promtool" != " promtool: FAILED" ] ||
    { fail "$name" "got=$got$promtool"; return; }
  pass "$name${promtool:+ ($promtool)}"
}

t_e_prolog_twenty_at_once() {
  local name="20 prologs at once with --history and --metrics-dir: 20 whole lines in one file, each read back, one metrics file"
  local dir=$OUT/prolog i
  for i in $(seq 20); do
    "$PF" --prolog --timeout 20 --history "$dir/history" --metrics-dir "$dir/metrics" >/dev/null 2>&1 &
  done
  wait
  local host; host=$(hostname)
  local file=$dir/history/$host.jsonl
  local got
  got=$(python3 -c '
import json, sys
n = 0
for line in open(sys.argv[1]):
    d = json.loads(line)
    assert d["v"] == 1 and d["step"] in ("prolog",) and d["kind"] in ("ok", "fault", "fabric", "fingerprint"), d
    n += 1
print(n)' "$file" 2>&1)
  [ "$got" = 20 ] && [ -f "$dir/metrics/mn_preflight_$host.prom" ] && [ -z "$(ls -A "$dir/metrics" | grep -v '\.prom$')" ] ||
    { fail "$name" "got=$got" "$(ls -a "$dir/metrics" 2>&1 | tr '\n' ' ')"; return; }
  pass "$name"
}

# A sysfs tree of a node with two GPUs behind ports of their own and two
# HCAs without ports (the fabric stays the cluster's): TREE WIDTH FIRMWARE,
# WIDTH the second GPU's link now.
skew_tree() {
  local t=$1 w=$2 fw=$3 g port addr
  for g in 1 2; do
    port=0000:00:0$g.0 addr=0000:$((g + 1))a:00.0
    mkdir -p "$t/devices/pci0000:00/$port/$addr" "$t/bus/pci/devices"
    echo "32.0 GT/s PCIe" >"$t/devices/pci0000:00/$port/max_link_speed"
    echo 16 >"$t/devices/pci0000:00/$port/max_link_width"
    echo "2.5 GT/s PCIe" >"$t/devices/pci0000:00/$port/$addr/current_link_speed"
    echo "32.0 GT/s PCIe" >"$t/devices/pci0000:00/$port/$addr/max_link_speed"
    echo 16 >"$t/devices/pci0000:00/$port/$addr/max_link_width"
    if [ $g = 2 ]; then echo "$w"; else echo 16; fi >"$t/devices/pci0000:00/$port/$addr/current_link_width"
    ln -sfn "../../../devices/pci0000:00/$port/$addr" "$t/bus/pci/devices/$addr"
  done
  for g in 0 1; do
    mkdir -p "$t/class/infiniband/mlx5_$g"
    echo "$fw" >"$t/class/infiniband/mlx5_$g/fw_ver"
  done
}

t_f_node_skew_named() {
  local name="each node seen as it is: node1's second GPU trained at x8 fails it alone; node2's HCA firmware and node0's own NCCL_IB_TIMEOUT warn, each naming that node; nobody else named"
  local t=$OUT/skew
  skew_tree "$t/good" 16 28.39.1002
  skew_tree "$t/narrow" 8 28.39.1002
  skew_tree "$t/oldfw" 16 28.36.1010
  chmod -R a+rX "$t"
  run srun -N3 --ntasks-per-node=1 --mn-nccl bash -c \
    "case \$SLURMD_NODENAME in node0) tree=good; export NCCL_IB_TIMEOUT=22 ;; node1) tree=narrow ;; *) tree=oldfw ;; esac
     export MN_NCCL_SYSFS_ROOT=$t/\$tree MN_PREFLIGHT_GPU_BUSES=0000:2a:00.0,0000:3a:00.0; exec $PF --no-pairs"
  grep -E '^(node[0-2] |problem|warning|FAIL|PASS)' "$OUT/last" | cut -c1-300 | sed 's/^/    /'
  [ $RC -eq 1 ] && has '^problem: node1: fingerprint: GPU 0000:3a:00.0.s PCIe link trained at x8, while the GPU and its port take x16' &&
    has 'node2: fingerprint: HCA firmware 28\.36\.1010 \(mlx5_0,mlx5_1\), the others 28\.39\.1002' &&
    has 'node0: fingerprint: NCCL environment NCCL_IB_TIMEOUT=22 \(most nodes unset\)' &&
    ! has '^problem: node[02]' && ! has 'node[12]: fingerprint: NCCL environment' ||
    { fail "$name" "rc=$RC"; return; }
  pass "$name"
}

run_checks
