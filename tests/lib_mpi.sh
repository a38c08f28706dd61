# Shared by the tensor-parallel tests tests/cli_tp*.sh (sourced): mpirun as
# root in a container, over Open MPI's self/vader/tcp transports, more ranks
# than cores allowed. Exits 77 (skipped) when mpirun is missing or txc was
# built without MPI.
if ! command -v mpirun >/dev/null 2>&1; then
  echo "skipped: no mpirun (apt-get install openmpi-bin libopenmpi-dev)"
  exit 77
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=${OMPI_MCA_btl:-self,vader,tcp}
export OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_mpi_yield_when_idle=1
# The sanitizer build under mpirun: no leak check (Open MPI unloads its
# plugins at MPI_Finalize, so their allocations cannot be told from txc's
# nor suppressed; txc's own paths are leak-checked by test_shard run alone).
# Memory errors are still caught.
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
# mpirun -np N COMMAND...: the ranks' stdout and stderr as mpirun gives them
mpi() {
  local n=$1
  shift
  mpirun --allow-run-as-root --oversubscribe -np "$n" "$@"
}
if mpi 2 "$TXC" generate --model "$SHARED/models/stories260K" --tp 2 --prompt x -n 1 2>&1 | grep -q "without MPI"; then
  echo "skipped: txc was built without MPI (cmake -DTXC_MPI=ON)"
  exit 77
fi
