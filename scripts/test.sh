#!/usr/bin/env bash
# Install (OS packages, .venv, the torch venv) and run the whole test suite: exactly what
# CI runs.
#
# One pytest session over every test, in CK_TEST_WORKERS processes (pytest-xdist, 4 by
# default: on 2 cores, a test waiting for a node or a timer leaves a core to another); the
# tests of a module that share a module-scoped fixture go to one process (loadgroup), so
# the fixture is made once. Each
# process that runs a sandbox test starts a sandbox of its own, on a loopback block of
# its own (127.B.0.0/16), so they never share an address; the pipeline tests start theirs.
# Random order (pytest-randomly); CK_TEST_SEED=N repeats an order.
# As root, where the kernel allows it, the tests run in a network namespace of their own
# with only loopback up (unshare -n): no test can reach beyond 127.0.0.0/8, whatever code
# it runs. Arguments go to pytest (e.g. -x, -k NAME, a path).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
.venv/bin/ruff check clusterkit sandbox tests bench
seed="${CK_TEST_SEED:-$((RANDOM * 32768 + RANDOM))}"
workers="${CK_TEST_WORKERS:-4}"
echo "test order: random, seed $seed (CK_TEST_SEED=$seed scripts/test.sh repeats it)"

# "$@" in a new network namespace with loopback up, where root may make one; else as is
loopback_only() {
    if [ "$(id -u)" -eq 0 ] && unshare -n true 2>/dev/null; then
        echo "network: a namespace of the tests' own, loopback only (unshare -n)"
        unshare -n sh -c 'ip link set lo up && exec "$@"' sh "$@"
    else
        echo "network: the machine's own (no network namespace here: not root, or refused)"
        "$@"
    fi
}

# pytest rewrites every test module's asserts on import (about 8 s of CPU): with
# PYTHONDONTWRITEBYTECODE set (as on this machine) each of the xdist processes did it
# again. A collection first writes the rewritten modules (tests/**/__pycache__, ignored
# by git), on both cores; every process of the run then reads them.
for part in tests/unit "tests/integration tests/e2e"; do
    # shellcheck disable=SC2086  # the second part is two paths
    PYTHONDONTWRITEBYTECODE='' .venv/bin/python -m pytest -q -p no:cacheprovider \
        -p no:randomly --collect-only $part >/dev/null &
done
wait
loopback_only .venv/bin/python -m pytest -q -p no:cacheprovider -p randomly \
    "--randomly-seed=$seed" -n "$workers" --dist loadgroup --durations=25 "$@"
