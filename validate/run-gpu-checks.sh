#!/usr/bin/env bash
# validate/run-gpu-checks.sh: every GPU check of zerosim in one run, results in one folder.
#
#   validate/run-gpu-checks.sh            (from anywhere; builds in $BUILD_DIR or build-gpu/)
#   SKIP_BUILD=1 BUILD_DIR=build validate/run-gpu-checks.sh     (reuse a CUDA build)
#   validate/run-gpu-checks.sh --cpu      (no GPU: the same plan -> replay -> compare path with
#                                          the CPU backend; CI runs it so the script cannot rot)
#
# On a fresh GPU machine it fits in 10 minutes: every step has its own limit, and no step may
# run past what is left of TOTAL_BUDGET (570 s by default); a step that would not fit is skipped
# and recorded as such. A failing step is recorded and the others still run.
#   0 install    scripts/install-deps.sh (Debian packages; the CUDA toolkit and NCCL are the
#                machine's)
#   1 build      cmake Release, ZEROSIM_CUDA=ON, this GPU's architecture only; zerosim,
#                zerosim-validate, adam_bench and the GPU test binaries
#   2 gtests     the GPU tests of kernels/ and validate/ (they skip without a GPU)
#   3 kernel     zerosim-validate kernel-check: the Adam kernel against the CPU reference on fresh
#                random data (fp32 relative error <= 1e-6, no NaN/Inf, every output written)
#   4 adam       adam_bench: params/s and achieved GB/s (bytes: read master, m, v, grad; write
#                master, m, v, param copy) as a share of the measured device-to-device copy GB/s;
#                bf16 grad + bf16 copy, and fp32 grad without copy (the same 28 B/param torch's
#                fused AdamW moves), with torch's fused AdamW beside it where torch is installed
#   5 bench      mpirun -np <all local GPUs> zerosim-validate bench -> calibration.json
#   6 replay     zerosim plan for a small scenario on all local GPUs (ZeRO-2 and ZeRO-3), replayed
#                with mpirun on the GPUs, then zerosim-validate compare
# Results: $OUT if set, else validate/results/<gpu>_<date>/: a log per step, checks.log,
# summary.json (commit the folder: it is what validate/README.md reports from). Exit status: 0
# when every step passed.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build-gpu}
[[ $BUILD = /* ]] || BUILD=$ROOT/$BUILD
JOBS=${JOBS:-$(nproc)}
TOTAL_BUDGET=${TOTAL_BUDGET:-570}
CPU_ONLY=0
[[ ${1:-} = --cpu ]] && CPU_ONLY=1

if [[ $CPU_ONLY = 1 ]]; then
  GPU_NAME=cpu
  NGPU=${CPU_RANKS:-2}
  ARCH=
elif ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "run-gpu-checks: no GPU here (nvidia-smi missing or failing); run with --cpu for the" \
       "CPU path" >&2
  exit 2
else
  GPU_NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
  NGPU=$(nvidia-smi -L | wc -l)
  ARCH=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d '.')
fi
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
if [[ -n ${OUT:-} ]]; then
  RES=$OUT
else
  RES=$ROOT/validate/results/$(echo "$GPU_NAME" | tr -c 'A-Za-z0-9.\n-' '_')_$STAMP
fi
mkdir -p "$RES"
LOG=$RES/checks.log
: >"$LOG"
declare -A STATUS

say() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$LOG"; }
# step NAME SECONDS CMD...: runs CMD with a time limit (its own, or what is left of the total
# budget if less), output to NAME.log, records the outcome.
step() {
  local name=$1 limit=$2
  shift 2
  local left=$((TOTAL_BUDGET - SECONDS))
  if ((left < 10)); then
    STATUS[$name]="SKIPPED: the ${TOTAL_BUDGET}s budget is spent"
    say "== $name: ${STATUS[$name]}"
    return 1
  fi
  ((limit > left)) && limit=$left
  say "== $name (limit ${limit}s): $*"
  local t0=$SECONDS
  timeout --kill-after=10 "$limit" "$@" >"$RES/$name.log" 2>&1
  local rc=$?
  local took=$((SECONDS - t0))
  if [[ $rc -eq 0 ]]; then
    STATUS[$name]="ok (${took}s)"
  elif [[ $rc -eq 124 || $rc -eq 137 ]]; then
    STATUS[$name]="TIMEOUT after ${limit}s"
  else
    STATUS[$name]="FAILED rc=$rc (${took}s)"
  fi
  say "   $name: ${STATUS[$name]}"
  tail -5 "$RES/$name.log" | sed 's/^/   | /' | tee -a "$LOG"
  return $rc
}

say "GPU: $GPU_NAME x$NGPU${ARCH:+ (sm_$ARCH)}; results in $RES; budget ${TOTAL_BUDGET}s"
[[ $CPU_ONLY = 1 ]] || nvidia-smi >"$RES/nvidia-smi.txt" 2>&1

MPIRUN=()
if [[ $CPU_ONLY = 1 ]]; then
  say "CPU path: ranks run as threads of one process"
elif command -v mpirun >/dev/null; then
  MPIRUN=(mpirun --oversubscribe -np "$NGPU")
  [[ $(id -u) = 0 ]] && MPIRUN+=(--allow-run-as-root)
  export OMPI_MCA_btl_vader_single_copy_mechanism=none
else
  say "mpirun not found: bench and replay run as one process on GPU 0"
  NGPU=1
fi

# ---- 0 install, 1 build --------------------------------------------------------------------------
if [[ -z ${SKIP_BUILD:-} ]]; then
  step install 150 bash "$ROOT/scripts/install-deps.sh"
  cuda_args=(-DZEROSIM_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$ARCH")
  [[ $CPU_ONLY = 1 ]] && cuda_args=(-DZEROSIM_CUDA=OFF)
  step configure 60 cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release "${cuda_args[@]}"
  targets=(zerosim zerosim-validate adam_bench zerosim_kernels_cuda_tests zerosim_validate_gpu_tests)
  avail=()
  for t in "${targets[@]}"; do
    grep -q "^$t:" "$BUILD/Makefile" 2>/dev/null && avail+=("$t")
  done
  step build 300 cmake --build "$BUILD" -j "$JOBS" --target "${avail[@]}"
fi
V=$BUILD/zerosim-validate
Z=$BUILD/zerosim
AB=$BUILD/kernels/adam_bench

if [[ $CPU_ONLY = 0 ]]; then
  # ---- 2 GPU unit tests --------------------------------------------------------------------------
  for t in kernels/zerosim_kernels_cuda_tests validate/zerosim_validate_gpu_tests; do
    [[ -x $BUILD/tests/$t ]] && step "gtest_$(basename "$t")" 60 "$BUILD/tests/$t" --gtest_brief=1
  done

  # ---- 3 kernel check ----------------------------------------------------------------------------
  step kernel_check 30 "$V" kernel-check --out "$RES/kernel_check.json"

  # ---- 4 Adam throughput vs HBM copy (and torch) -------------------------------------------------
  if [[ -x $AB ]]; then
    step adam_bf16 30 "$AB" --n 268435456 --grad bf16 --copy bf16 --iters 20 --warmup 5
    step adam_f32 30 "$AB" --n 268435456 --grad f32 --copy none --iters 20 --warmup 5
  else
    say "adam_bench not built; the bench step's adam_params_per_s stands in"
  fi
  if command -v python3 >/dev/null && python3 -c "import torch" 2>/dev/null; then
    step torch_adam 60 python3 "$ROOT/validate/torch_adam.py" --n 268435456
  fi

  # ---- 5 bench -> calibration.json ---------------------------------------------------------------
  step bench 120 "${MPIRUN[@]}" "$V" bench --out "$RES/calibration.json" --timeout 100
fi

# ---- 6 replay of small plans ---------------------------------------------------------------------
# On the CPU the replay runs ranks as threads with each GEMM and the Adam step cut down
# (--cpu-max-elements): the path, not the numbers, is what the CPU run checks.
BACKEND=gpu
MODEL=(--model gpt3-1.3b)
if [[ $CPU_ONLY = 1 ]]; then
  BACKEND=cpu
  cat >"$RES/cpu_model.json" <<'JSON'
{"model": {"num_layers": 2, "hidden_size": 256, "num_attention_heads": 8, "vocab_size": 4096,
           "seq_length": 256},
 "cluster": {"preset": "dgx-h100", "nodes": 1}}
JSON
  MODEL=("$RES/cpu_model.json")
fi
for stage in 2 3; do
  plan=$RES/plan_zero$stage.json
  plan_args=(plan "${MODEL[@]}" --num-gpus "$NGPU" --zero "$stage" --mbs 1 --gas 2
    --set sim.allow_oom=true --out "$plan")
  # Every rank: sim.ranks=all where the simulator folds symmetric ranks by default.
  "$Z" list keys 2>/dev/null | grep -q "sim.ranks" && plan_args+=(--set sim.ranks=all)
  step "plan_zero$stage" 60 "$Z" "${plan_args[@]}" &&
    step "replay_zero$stage" 90 "${MPIRUN[@]}" "$V" replay "$plan" --backend "$BACKEND" \
      --warmup 1 --iters 3 --timeout 80 --out "$RES/replay_zero$stage.json" &&
    step "compare_zero$stage" 30 "$V" compare "$RES/replay_zero$stage.json" --top 25 \
      --json "$RES/compare_zero$stage.json"
done

# ---- summary -------------------------------------------------------------------------------------
python3 - "$RES" <<'PY' 2>>"$LOG" || say "summary: could not write summary.json"
import json, os, re, sys
res = sys.argv[1]
def read(name):
    try:
        with open(os.path.join(res, name)) as f:
            return f.read()
    except OSError:
        return None
def adam(log):
    if not log:
        return None
    out = {}
    m = re.search(r"adam ms=([\d.]+) params_per_s=([\d.e+]+) GB_per_s=([\d.]+)", log)
    c = re.search(r"memcpy_d2d .*GB_per_s=([\d.]+)", log)
    b = re.search(r"bytes_per_param=(\d+)", log)
    if m:
        out.update(ms=float(m[1]), params_per_s=float(m[2]), GBps=float(m[3]))
    if c:
        out["hbm_copy_GBps"] = float(c[1])
    if b:
        out["bytes_per_param"] = int(b[1])
    if m and c:
        out["share_of_hbm_copy"] = float(m[3]) / float(c[1])
    return out
s = {"results": res}
kc = read("kernel_check.json")
if kc:
    k = json.loads(kc)
    s["kernel_check"] = {x: k[x] for x in ("cases", "failures", "max_rel_error", "bound", "seed")}
s["adam_bf16_grad_bf16_copy"] = adam(read("adam_bf16.log"))
s["adam_f32_grad_no_copy"] = adam(read("adam_f32.log"))
t = read("torch_adam.log")
if t:
    try:
        s["torch_fused_adamw"] = json.loads(t.strip().splitlines()[-1])
    except (ValueError, IndexError):
        s["torch_fused_adamw"] = {"reason": "unreadable output"}
cal = read("calibration.json")
if cal:
    c = json.loads(cal)
    s["calibration"] = {x: c.get(x) for x in ("gpu", "num_gpus", "hbm_copy_GBps", "h2d_GBps", "d2h_GBps", "adam_params_per_s")}
    s["calibration"]["best_gemm_tflops"] = max((g["tflops"] for g in c.get("gemm", [])), default=None)
for stage in (2, 3):
    r = read(f"replay_zero{stage}.json")
    if r:
        s[f"replay_zero{stage}"] = json.loads(r)["step"]
with open(os.path.join(res, "summary.json"), "w") as f:
    json.dump(s, f, indent=1)
print(json.dumps(s, indent=1))
PY

failed=0
say "== summary ($GPU_NAME x$NGPU)"
for k in "${!STATUS[@]}"; do
  say "   $k: ${STATUS[$k]}"
  [[ ${STATUS[$k]} == ok* ]] || failed=1
done
say "results: $RES"
exit $failed
