#!/usr/bin/env bash
# Install everything, then run the whole pipeline on the embedded sandbox and print a
# summary (scripts/pipeline.py): sandbox start -> pack -> snapshot-dataset -> up ->
# deploy-dataset -> train -> down -> sandbox stop. Exit 0 only when every stage did its
# job and nothing is left behind.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
cleanup() {
    if [ -n "${DEMO_AGENT_PID:-}" ]; then kill "$DEMO_AGENT_PID" 2>/dev/null || true; fi
    if [ -n "${DEMO_KEY_DIR:-}" ]; then rm -rf -- "$DEMO_KEY_DIR"; fi
}
trap cleanup EXIT
# clusterkit authorizes the key held by your ssh-agent (it never copies a private key).
# With no agent or an empty one, the demo makes a throwaway key in a throwaway agent.
if ! ssh-add -l >/dev/null 2>&1; then
    eval "$(ssh-agent -s)" >/dev/null
    DEMO_AGENT_PID=$SSH_AGENT_PID
    DEMO_KEY_DIR=$(mktemp -d)
    ssh-keygen -q -t ed25519 -N '' -C clusterkit-demo -f "$DEMO_KEY_DIR/id_ed25519"
    ssh-add -q "$DEMO_KEY_DIR/id_ed25519"
fi
.venv/bin/python scripts/pipeline.py "$@"
