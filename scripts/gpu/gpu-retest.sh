#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Retests on the GPU path (issue 18), on a device-tool machine (1 GPU or more):
#   run: bash scripts/gpu/gpu-retest.sh [RUNS]   carry: .device spank/.libs helper/mn-preflight
# Four emulated GPU nodes on the node "big" (srun -N1 -n4 --mn-emulate-nodes=4,
# no --gres: every task sees GPU 0, each emulated node is its own NCCL host
# through NCCL_HOSTID), so the pair rounds between nodes run on NCCL over
# sockets and a retest is a second round of ncclCommSplit on communicators
# every rank kept. RUNS times each (default 3):
#   healthy  nothing done: PASS, nobody named
#   noise    rank 3's host stalls 50 ms before each launch of its first pair
#            rounds only (test hook MN_PREFLIGHT_STALL_PAIRS=3): its node
#            becomes a suspect, is retested against nodes proven fast (a
#            control pair of two of them timed beside each retest), runs
#            at speed there, and is not named: PASS, with a note
#   slow     the same stall in the retests too (MN_PREFLIGHT_STALL_RETESTS=3):
#            exit 1, that node named "confirmed by retests", nobody else
#   inside   (3 GPUs or more) the same stalls on rank 1 of one task per GPU on
#            big: its GPU retested with two GPUs proven fast inside the node
# Each run prints its verdict lines and its time from launch to exit; the
# last line sums up (RESULT PASS when every run gave what it should).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
TOP=$(pwd)
RUNS=${1:-3}
R=${OUT:-/tmp/mn-gpu-retest}
mkdir -p "$R"
exec > >(tee "$R/retest.txt") 2>&1
source scripts/gpu/gpu-env.sh
echo "== machine: $(nvidia-smi -L | wc -l) GPUs: $(nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c | xargs); NCCL ${MN_PREFLIGHT_NCCL:-from the loader path}; NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE-unset}"

good=0 bad=0
now() { date +%s.%N; }

# run CASE I [VAR=VALUE]: one check of 4 emulated nodes; judged by CASE.
run() {
  local case=$1 i=$2 hook=${3:-} out=$R/$1-$2.txt t0 t1 rc ok=1
  t0=$(now)
  env ${hook:+"$hook"} srun -w big -N1 -n4 --mn-nccl=auto --mn-emulate-nodes=4 "$PF" --timeout 60 >"$out" 2>&1
  rc=$?
  t1=$(now)
  local named others retested cleared
  named=$(grep -cE '^[^ ]*emu3 .*(slow|confirmed)' "$out")
  others=$(grep -E '^[^ ]*emu[0-2] ' "$out" | grep -vcE ' ok$')
  retested=$(grep -cE 'retesting [^ ]*emu3' "$out")
  cleared=$(grep -cE 'note: [^ ]*emu3: its first pairs looked slow' "$out")
  case $case in
    healthy) [ $rc = 0 ] && [ "$others" = 0 ] && [ "$named" = 0 ] || ok=0 ;;
    noise) [ $rc = 0 ] && [ "$others" = 0 ] && [ "$retested" -ge 1 ] && [ "$cleared" = 1 ] || ok=0 ;;
    slow) [ $rc = 1 ] && [ "$others" = 0 ] && [ "$named" = 1 ] && grep -q 'confirmed by retests' "$out" || ok=0 ;;
  esac
  echo "-- $case $i: exit $rc in $(python3 -c "print(f'{$t1-$t0:.2f}')") s, $([ $ok = 1 ] && echo as it should || echo WRONG)"
  grep -E '^[^ ]*emu[0-9] |^note:|^problem:|retesting|^(PASS|FAIL)' "$out" | sed 's/^/   /'
  if [ $ok = 1 ]; then good=$((good + 1)); else bad=$((bad + 1)); sed 's/^/   | /' "$out" | tail -30; fi
}

for i in $(seq "$RUNS"); do
  run healthy "$i"
  run noise "$i" MN_PREFLIGHT_STALL_PAIRS=3
  run slow "$i" MN_PREFLIGHT_STALL_RETESTS=3
done
# Inside one node (3 GPUs or more): one task per GPU on big, rank 1's GPU
# stalled in the first GPU pair rounds only (cleared by its retests with
# two GPUs proven fast) or in the retests too (confirmed, named alone).
ngpu=$(nvidia-smi -L | grep -c '^GPU')
inside() {
  local case=$1 hook=$2 out=$R/inside-$1.txt rc ok=1
  env "$hook" srun -w big -N1 -n"$ngpu" --gres=gpu:"$ngpu" --mn-nccl=auto "$PF" --timeout 60 >"$out" 2>&1
  rc=$?
  case $case in
    noise) [ $rc = 0 ] && grep -q '^note: big: GPU[0-9].*: its first pairs looked slow' "$out" || ok=0 ;;
    slow) [ $rc = 1 ] && [ "$(grep -c '^problem:' "$out")" = 1 ] && grep -q '^problem: big: slow GPU .*confirmed when retested with' "$out" || ok=0 ;;
  esac
  echo "-- inside a node, $case: exit $rc, $([ $ok = 1 ] && echo as it should || echo WRONG)"
  grep -E 'retesting|^note:|^problem:|^GPU pairs|^(PASS|FAIL)' "$out" | sed 's/^/   /'
  if [ $ok = 1 ]; then good=$((good + 1)); else bad=$((bad + 1)); tail -20 "$out" | sed 's/^/   | /'; fi
}
if [ "$ngpu" -ge 3 ]; then
  inside noise MN_PREFLIGHT_STALL_PAIRS=1
  inside slow MN_PREFLIGHT_STALL_RETESTS=1
else
  echo "-- inside a node: skipped, $ngpu GPUs (a node needs 3 or more for a GPU to be told from its links)"
fi

# The JSON of a slow run: the retests the verdict rests on.
MN_PREFLIGHT_STALL_RETESTS=3 srun -w big -N1 -n4 --mn-nccl=auto --mn-emulate-nodes=4 "$PF" --timeout 60 --json \
  >"$R/slow.json" 2>/dev/null
if python3 - "$R/slow.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
print("-- JSON of a slow run: verdict", j["verdict"], "| pairs", len(j["pairs"]), "| retests",
      [(t["suspect"], t["partner"], t["busbw_gbps"]) for t in j["retests"]], "| controls",
      [(t["a"], t["b"], t["busbw_gbps"]) for t in j["retest_controls"]], "| problems", j["problems"])
ok = (j["verdict"] == "FAIL" and len(j["retests"]) >= 2 and all(t["suspect"].endswith("emu3") for t in j["retests"])
      and len(j["retest_controls"]) >= 1 and not any(t["a"].endswith("emu3") or t["b"].endswith("emu3") for t in j["retest_controls"]))
sys.exit(0 if ok else 1)
PY
then good=$((good + 1)); else bad=$((bad + 1)); echo "   the JSON does not show the retests"; fi
echo
echo "RESULT $([ $bad = 0 ] && echo PASS || echo FAIL): $good of $((good + bad)) runs gave the verdict they should"
[ $bad = 0 ]
