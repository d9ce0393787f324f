#!/usr/bin/env bash
# usage: receipt.sh STEP DIGEST
# Records that bootstrap step STEP succeeded with inputs DIGEST (sha256:<64 hex>):
# /var/lib/clusterkit/steps/STEP, written atomically. Idempotent.
# CLUSTERKIT_ROOT=DIR writes under DIR instead of / (tests).
set -euo pipefail
usage="usage: receipt.sh STEP DIGEST"
case "${1:-}" in -h|--help) echo "$usage"; exit 0;; esac
[ $# -eq 2 ] || { echo "$usage" >&2; exit 2; }
step=$1 digest=$2
[[ $step =~ ^[a-z][a-z0-9_-]*$ ]] || { echo "receipt.sh: bad step name: $step" >&2; exit 2; }
[[ $digest =~ ^sha256:[0-9a-f]{64}$ ]] || { echo "receipt.sh: bad digest: $digest" >&2; exit 2; }
dir="${CLUSTERKIT_ROOT:-}/var/lib/clusterkit/steps"
mkdir -p "$dir"
tmp=$(mktemp "$dir/.$step.XXXXXX")
printf '%s\n' "$digest" > "$tmp"
chmod 644 "$tmp"
mv -f "$tmp" "$dir/$step"
