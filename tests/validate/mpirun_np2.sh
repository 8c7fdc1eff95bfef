#!/bin/sh
# mpirun --oversubscribe -np 2 zerosim-validate on the CPU backend (see CMakeLists.txt).
# Arguments: ZEROSIM ZEROSIM_VALIDATE MPIRUN HAVE_MPI SCENARIO WORKDIR. Exit 77 = skipped.
set -eu
zerosim=$1 validate=$2 mpirun=$3 have_mpi=$4 scenario=$5 work=$6
if [ -z "$mpirun" ] || ! [ -x "$mpirun" ]; then
  echo "SKIP: mpirun not found (install Open MPI: apt-get install openmpi-bin libopenmpi-dev)"
  exit 77
fi
if [ "$have_mpi" != 1 ]; then
  echo "SKIP: zerosim-validate was built without MPI (find_package(MPI) failed at configure time)"
  exit 77
fi
mkdir -p "$work"
flags="--oversubscribe -np 2"
[ "$(id -u)" = 0 ] && flags="$flags --allow-run-as-root"
# Shared-memory transport without ptrace-based single copy: works in unprivileged containers.
export OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_rmaps_base_oversubscribe=1

# Every rank (sim.ranks=all); simulators without the key export every rank anyway.
"$zerosim" plan "$scenario" --set sim.ranks=all --out "$work/plan.json" 2>/dev/null ||
  "$zerosim" plan "$scenario" --out "$work/plan.json"
# shellcheck disable=SC2086
timeout 240 "$mpirun" $flags "$validate" replay "$work/plan.json" --backend cpu --iters 2 \
  --timeout 60 --out "$work/replay.json"
grep -q '"format": "zerosim-replay/1"' "$work/replay.json"
ranks=$(grep -c '"step_measured_s"' "$work/replay.json")
[ "$ranks" = 2 ] || { echo "expected 2 ranks in the replay output, found $ranks"; exit 1; }
# shellcheck disable=SC2086
timeout 240 "$mpirun" $flags "$validate" zero-check --stages 1,2,3 --steps 3 --sizes 1,7,1000,33
"$validate" compare "$work/replay.json" --top 5 > "$work/compare.txt"
grep -q "by class" "$work/compare.txt"
echo "mpirun -np 2: replay, zero-check and compare passed"
