#!/usr/bin/env bash
# One plot script on zerosim's own output: runs the built zerosim to make the input in WORK_DIR,
# runs the script as plots/README.md shows with --summary, and checks the image and its summary
# (check_plot.py: not blank, every text inside the image, uncut and clear of the others, labels
# unique, one time unit per axis) and what the script says it drew against zerosim's files
# (check_drawn.py: e.g. no layout that does not fit drawn as a value). Exit 77 (skipped) when
# PYTHON cannot import matplotlib. No check reads a clock.
#
#   run_plot_test.sh PLOT ZEROSIM SOURCE_DIR WORK_DIR [PYTHON]
#   PLOT: timeline | memory | sweep | validation | collective
set -euo pipefail

plot=$1 zerosim=$2 src=$3 work=$4 py=${5:-/usr/bin/python3}
plots=$src/plots
checks=$src/tests/plots
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

# draw SCRIPT ARGS... -o IMAGE: runs plots/SCRIPT with --summary IMAGE.summary.json, then checks
# the image and its layout.
draw() {
  local script=$1
  shift
  local out=${*: -1}
  "$py" "$plots/$script" "$@" --summary "$out.summary.json"
  "$py" "$checks/check_plot.py" "$out" "$out.summary.json"
}

# drawn KIND ARGS...: check_drawn.py, what a script drew against zerosim's files.
drawn() {
  "$py" "$checks/check_drawn.py" "$@"
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
    # TP 2 x PP 2 with ZeRO-3 on 8 GPUs: every stream kind (compute, dp, tp, pp) and two stages.
    # The default trace holds the first rank of each stage (cluster ranks 0 and 4); --trace-ranks
    # all every simulated rank (0-1 and 4-5: DP 2 is folded to its first replica).
    "$zerosim" simulate gpt1b.json --tp 2 --pp 2 --zero 3 --trace step.json >/dev/null
    "$zerosim" simulate gpt1b.json --tp 2 --pp 2 --zero 3 --trace all.json --trace-ranks all \
      >/dev/null
    draw timeline.py step.json -o timeline.png
    drawn timeline step.json timeline.png.summary.json 0 4
    draw timeline.py all.json --ranks 4-5 --start 10 --end 40 --no-memory -o window.svg
    drawn timeline all.json window.svg.summary.json 4 5
    must_fail "$py" "$plots/timeline.py" step.json --ranks 1 -o none.png
    ;;
  memory)
    # ZeRO-0 does not fit (139 GiB on an 80 GiB GPU): its bar must say so.
    for z in 0 1 2 3; do
      "$zerosim" memory llama7b.json --zero "$z" --json "mem$z.json" >/dev/null
    done
    draw memory.py mem0.json mem1.json mem2.json mem3.json -o memory.png
    drawn memory memory.png.summary.json mem0.json mem1.json mem2.json mem3.json
    # Per pipeline stage: a PP-4 simulate report and its (default) trace, whose stage peaks
    # must be the report's memory_per_stage_bytes.
    "$zerosim" simulate llama7b.json --pp 4 --zero 1 --mbs 1 --gbs 64 --json pp4.json \
      --trace pp4.trace.json >/dev/null
    draw memory.py mem1.json pp4.json --trace pp4.trace.json -o memory_pp.png
    drawn memory memory_pp.png.summary.json mem1.json pp4.json
    drawn stages memory_pp.png.summary.json pp4.json
    ;;
  sweep)
    # llama2-7b on one node: ZeRO-0 never fits, micro-batches 4 and 8 fit at no stage, and
    # ZeRO-1 at micro-batch 8 would be the fastest; TP 3 does not divide 8 GPUs (infeasible).
    cat >sweep_base.json <<'EOF'
{"model": "llama2-7b", "cluster": {"preset": "dgx-h100", "nodes": 1},
 "training": {"micro_batch_size": 1, "global_batch_size": 256}}
EOF
    vary=(--vary zero.stage=0,1,3 --vary training.micro_batch_size=1,2,4,8 --vary parallel.tp=1,3)
    "$zerosim" sweep sweep_base.json "${vary[@]}" --jobs 2 --out sweep.csv 2>/dev/null
    "$zerosim" sweep sweep_base.json "${vary[@]}" --jobs 2 --out sweep.json 2>/dev/null
    draw sweep.py sweep.csv --x zero.stage --y training.micro_batch_size --metric tokens_per_s \
      --filter parallel.tp=1 -o heatmap.png
    drawn sweep sweep.csv heatmap.png.summary.json --unfit-would-win
    draw sweep.py sweep.json --x zero.stage --y training.micro_batch_size --metric tokens_per_s \
      --filter parallel.tp=1 -o heatmap_json.png
    drawn sweep sweep.json heatmap_json.png.summary.json --unfit-would-win
    # Several rows per cell (the micro-batch sizes): the best of those that fit, or none.
    draw sweep.py sweep.csv --x parallel.tp --y zero.stage --metric step_time_s -o step.png
    drawn sweep sweep.csv step.png.summary.json
    draw sweep.py sweep.csv --x training.micro_batch_size --group zero.stage \
      --metric tokens_per_s --filter parallel.tp=1 -o tokens.png
    drawn sweep sweep.csv tokens.png.summary.json --unfit-would-win
    draw sweep.py sweep.json --x training.micro_batch_size --group zero.stage \
      --metric peak_memory_bytes --filter parallel.tp=1 -o memory.svg
    drawn sweep sweep.json memory.svg.summary.json
    must_fail "$py" "$plots/sweep.py" sweep.csv --x no.such.column -o none.png
    # A fits column the table lacks is an error, never "everything fits".
    must_fail "$py" "$plots/sweep.py" sweep.csv --x zero.stage --fits-column fits -o none.png
    ;;
  validation)
    # The scatter of all 75 cases; the analytical network keeps this a test of the plot (the
    # flow network's accuracy is reportPublished's), fast under the sanitizers too.
    "$zerosim" validate-published --set sim.network=analytical --json published.json >/dev/null
    draw validation.py published.json -o validation.png
    drawn validation published.json validation.png.summary.json
    ;;
  collective)
    "$zerosim" collective --cluster dgx-h100 --nodes 2 --collective all_reduce -b 8 -e 1G -f 2 \
      --json ar2.json >/dev/null
    "$zerosim" collective --cluster dgx-h200 --nodes 1 --collective all_reduce -b 32K -e 16G -f 2 \
      --json ar1.json >/dev/null
    draw collective.py ar2.json -o busbw.png
    drawn collective busbw.png.summary.json ar2.json
    draw collective.py ar2.json ar1.json --metric time -o time.svg
    drawn collective time.svg.summary.json ar2.json ar1.json
    # The measurements are in the repository (tests/collective fails without them).
    draw collective.py ar1.json --measured "$measurements/collectives.json" -o measured.png
    drawn collective measured.png.summary.json ar1.json
    "$zerosim" collective --validate "$measurements/collectives.json" --json validated.json \
      >/dev/null
    draw collective.py validated.json -o validated.png
    drawn collective validated.png.summary.json validated.json
    draw collective.py validated.json --metric time -o validated_time.png
    drawn collective validated_time.png.summary.json validated.json
    ;;
  *)
    echo "unknown plot: $plot"
    exit 2
    ;;
esac
