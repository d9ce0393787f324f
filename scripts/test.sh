#!/usr/bin/env bash
# Install (OS packages + .venv) and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
.venv/bin/ruff check clusterkit tests bench
exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
