#!/usr/bin/env bash
# Install (OS packages + .venv) and run the whole test suite: exactly what CI runs.
#
# Random order (pytest-randomly), one seed for both passes; CK_TEST_SEED=N repeats an order.
#   1. every test that does not use the sandbox daemon, in two processes (pytest-xdist);
#   2. the tests on the shared sandbox (its SSH nodes own 127.0.0.N:22), in one process;
#   3. the whole pipeline (scripts/pipeline.py), which starts and stops its own sandbox.
# Arguments go to both passes (e.g. -x, -k NAME, a path); a pass they leave empty is skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
.venv/bin/ruff check clusterkit tests bench
seed="${CK_TEST_SEED:-$((RANDOM * 32768 + RANDOM))}"
echo "test order: random, seed $seed (CK_TEST_SEED=$seed scripts/test.sh repeats it)"

run_pass() {
    local status=0
    .venv/bin/python -m pytest -q -p no:cacheprovider -p "randomly" "--randomly-seed=$seed" \
        "$@" || status=$?
    [ "$status" -eq 0 ] || [ "$status" -eq 5 ]  # 5: the arguments selected nothing here
}

run_pass -n 2 -m "not sandbox and not pipeline and not torch" "$@"
run_pass -m "sandbox and not pipeline" "$@"
run_pass -m pipeline "$@"
