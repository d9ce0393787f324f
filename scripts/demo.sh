#!/usr/bin/env bash
# Install everything, then run the main job end to end on the embedded sandbox:
# sandbox start -> validate -> up -> deploy-dataset -> train -> down -> sandbox stop.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
CK=.venv/bin/clusterkit
SPEC=examples/sandbox-cpu.yaml
export CLUSTERKIT_SANDBOX=1
step() { echo; echo "== clusterkit $*"; }
run_or_note() {
    # A step whose issue has not landed yet says so and the demo goes on.
    if ! out=$("$CK" "$@" 2>&1); then
        if grep -q "not yet available" <<<"$out"; then
            echo "   (not yet available in this version)"; return 0
        fi
        echo "$out"; return 1
    fi
    echo "$out"
}
step validate "$SPEC";        run_or_note validate "$SPEC"
step sandbox start;           run_or_note sandbox start
trap '"$CK" sandbox stop >/dev/null 2>&1 || true' EXIT
step up "$SPEC";              run_or_note up "$SPEC" --yes
step deploy-dataset "$SPEC";  run_or_note deploy-dataset "$SPEC"
step train "$SPEC";           run_or_note train "$SPEC"
step down "$SPEC";            run_or_note down "$SPEC" --yes
step sandbox stop;            run_or_note sandbox stop
