#!/usr/bin/env bash
# Usage: mpi_sweep_test.sh ZEROSIM SCENARIO.json WORKDIR HAVE_MPI
# Runs one sweep in one process and under `mpirun -np 2`, and compares the files byte for byte.
set -euo pipefail
bin=$1 scenario=$2 dir=$3 have_mpi=$4
if [[ "$have_mpi" != 1 ]]; then echo "SKIP: zerosim was built without MPI"; exit 77; fi
if ! command -v mpirun >/dev/null 2>&1; then echo "SKIP: mpirun not found"; exit 77; fi
rm -rf "$dir" && mkdir -p "$dir"
args=(sweep "$scenario" --vary zero.stage=0,1,2,3 --vary training.micro_batch_size=1,2,4
      --vary parallel.tp=1,2,3 --jobs 1)
mpi=(mpirun --allow-run-as-root --oversubscribe -np 2)
for ext in csv json; do
  "$bin" "${args[@]}" --out "$dir/single.$ext" >/dev/null
  "${mpi[@]}" "$bin" "${args[@]}" --out "$dir/mpi.$ext" >"$dir/mpi.$ext.log" 2>&1 || {
    echo "mpirun failed:"; cat "$dir/mpi.$ext.log"; exit 1; }
  cmp "$dir/single.$ext" "$dir/mpi.$ext"
  grep -q "2 ranks" "$dir/mpi.$ext.log" || { echo "not split over 2 ranks:"; cat "$dir/mpi.$ext.log"; exit 1; }
done
echo "mpirun -np 2 output identical to one process ($(wc -l <"$dir/single.csv") CSV lines)"
