#!/usr/bin/env bash
# One plot script on real zerosim output: runs zerosim to make the input in WORK_DIR, runs the
# script as plots/README.md shows, and checks that the image it wrote is a non-blank PNG (or a
# non-empty SVG). Exit 77 (skipped) when PYTHON cannot import matplotlib.
#
#   run_plot_test.sh PLOT ZEROSIM SOURCE_DIR WORK_DIR [PYTHON]
#   PLOT: timeline | memory | sweep | validation | collective
set -euo pipefail

plot=$1 zerosim=$2 src=$3 work=$4 py=${5:-/usr/bin/python3}
plots=$src/plots
measurements=$src/validate/measurements

if ! "$py" -c 'import matplotlib' 2>/dev/null; then
  echo "SKIP: $py cannot import matplotlib (install python3-matplotlib: scripts/install-deps.sh)"
  exit 77
fi

rm -rf "$work"
mkdir -p "$work"
cd "$work"

# Scenario files name what the tests depend on; every other key takes the registry default
# (not the built-in default scenario, which may change).
cat >llama7b.json <<'EOF'
{"model": "llama2-7b", "cluster": {"preset": "dgx-h100", "nodes": 2},
 "training": {"micro_batch_size": 2, "global_batch_size": 256}}
EOF
cat >gpt1b.json <<'EOF'
{"model": "gpt3-1.3b", "cluster": {"preset": "dgx-h100", "nodes": 1},
 "training": {"micro_batch_size": 1, "global_batch_size": 16}}
EOF

# check IMAGE...: exists, is not empty; a PNG has pixels that are not all one colour.
check() {
  for f in "$@"; do
    if [[ ! -s $f ]]; then
      echo "FAIL: $f was not written or is empty"
      exit 1
    fi
    case $f in
      *.png)
        "$py" - "$f" <<'EOF'
import sys
import matplotlib.image as image
a = image.imread(sys.argv[1])
assert a.shape[0] >= 200 and a.shape[1] >= 200, "image too small: %s" % (a.shape,)
assert a.std() > 0.01, "image is blank"
print("ok: %s %dx%d" % (sys.argv[1], a.shape[1], a.shape[0]))
EOF
        ;;
      *.svg)
        grep -q '<svg' "$f" || { echo "FAIL: $f is not an SVG"; exit 1; }
        echo "ok: $f"
        ;;
    esac
  done
}

# must_fail CMD...: a bad invocation exits non-zero with a message and writes no image.
must_fail() {
  if "$@" >out.txt 2>&1; then
    echo "FAIL: expected an error from: $*"
    exit 1
  fi
  grep -q "error" out.txt || { echo "FAIL: no error message from: $*"; cat out.txt; exit 1; }
}

case $plot in
  timeline)
    # TP 2 x PP 2 with ZeRO-3: every stream kind (compute, dp, tp, pp) and two stages; every
    # simulated rank (cluster ranks 0-1 and 4-5: DP 2 is folded to its first replica).
    "$zerosim" simulate gpt1b.json --tp 2 --pp 2 --zero 3 --trace step.json --trace-ranks all \
      >/dev/null
    "$py" "$plots/timeline.py" step.json -o timeline.png
    "$py" "$plots/timeline.py" step.json --ranks 4-5 --start 10 --end 40 --no-memory -o window.svg
    must_fail "$py" "$plots/timeline.py" step.json --ranks 99 -o none.png
    check timeline.png window.svg
    ;;
  memory)
    for z in 0 1 2 3; do
      "$zerosim" memory llama7b.json --zero "$z" --json "mem$z.json" >/dev/null
    done
    "$py" "$plots/memory.py" mem0.json mem1.json mem2.json mem3.json -o memory.png
    # Per pipeline stage: a PP-4 simulate report and its trace.
    "$zerosim" simulate llama7b.json --pp 4 --zero 1 --mbs 1 --gbs 64 --json pp4.json \
      --trace pp4.trace.json >/dev/null
    "$py" "$plots/memory.py" mem1.json pp4.json --trace pp4.trace.json -o memory_pp.png
    check memory.png memory_pp.png
    ;;
  sweep)
    "$py" "$src/tests/plots/make_sweep_csv.py" "$zerosim" sweep.csv
    "$py" "$plots/sweep.py" sweep.csv --x cluster.nodes --group zero.stage --metric tokens_per_s \
      -o tokens.png
    "$py" "$plots/sweep.py" sweep.csv --x zero.stage --y cluster.nodes --metric mfu -o mfu.png
    "$py" "$plots/sweep.py" sweep.csv --x cluster.nodes --group zero.stage \
      --metric peak_memory_bytes --filter parallel.tp=1 -o memory.svg
    must_fail "$py" "$plots/sweep.py" sweep.csv --x no.such.column -o none.png
    check tokens.png mfu.png memory.svg
    ;;
  validation)
    # The scatter of all 75 cases; the analytical network keeps this a test of the plot (the
    # flow network's accuracy is reportPublished's), fast under the sanitizers too.
    "$zerosim" validate-published --set sim.network=analytical --json published.json >/dev/null
    "$py" "$plots/validation.py" published.json -o validation.png
    check validation.png
    ;;
  collective)
    "$zerosim" collective --cluster dgx-h100 --nodes 2 --op all_reduce -b 8 -e 1G -f 2 \
      --json ar2.json >/dev/null
    "$zerosim" collective --cluster dgx-h200 --nodes 1 --op all_reduce -b 32K -e 16G -f 2 \
      --json ar1.json >/dev/null
    "$py" "$plots/collective.py" ar2.json -o busbw.png
    "$py" "$plots/collective.py" ar2.json ar1.json --metric time -o time.svg
    check busbw.png time.svg
    if [[ -f $measurements/collectives.json ]]; then
      "$py" "$plots/collective.py" ar1.json --measured "$measurements/collectives.json" -o measured.png
      "$zerosim" collective --validate "$measurements/collectives.json" --json validated.json >/dev/null
      "$py" "$plots/collective.py" validated.json -o validated.png
      check measured.png validated.png
    else
      echo "note: $measurements/collectives.json not found; measured overlays not tested"
    fi
    ;;
  *)
    echo "unknown plot: $plot"
    exit 2
    ;;
esac
