#!/usr/bin/env bash
# usage: env.sh --python PYTHON --hash HASH --owner USER [--shared-cache DIR] < PACKAGES
# The training environment: a virtualenv /opt/clusterkit/envs/HASH with the pip
# PACKAGES (stdin, one requirement per line; HASH: their hash, computed by clusterkit),
# and /opt/clusterkit/envs/current pointing at it. A complete env (marker file
# .clusterkit-packages holding HASH, written last) is never rebuilt; a changed package
# list gets a new HASH and a new env. With --shared-cache DIR on a mounted EFS, the
# packages are downloaded once into DIR/HASH (under a lock; the first node downloads,
# the others wait) and every node installs from there without the package index.
# Idempotent. CLUSTERKIT_ROOT=DIR builds under DIR instead of / (tests).
set -euo pipefail
usage="usage: env.sh --python PYTHON --hash HASH --owner USER [--shared-cache DIR] < PACKAGES"
python="" hash="" owner="" cache=""
while [ $# -gt 0 ]; do
    case "$1" in
        --python) python=${2:?$usage}; shift 2;;
        --hash) hash=${2:?$usage}; shift 2;;
        --owner) owner=${2:?$usage}; shift 2;;
        --shared-cache) cache=${2:?$usage}; shift 2;;
        -h|--help) echo "$usage"; exit 0;;
        *) echo "$usage" >&2; exit 2;;
    esac
done
[[ -n $python && $hash =~ ^[0-9a-f]{16,64}$ && -n $owner ]] || { echo "$usage" >&2; exit 2; }
root=${CLUSTERKIT_ROOT:-}
base="$root/opt/clusterkit/envs"
venv="$base/$hash"
marker="$venv/.clusterkit-packages"

point_current() {
    ln -sfn "$venv" "$base/.current.tmp"
    mv -Tf "$base/.current.tmp" "$base/current"
}

if [ -x "$venv/bin/python" ] && [ "$(cat "$marker" 2>/dev/null)" = "$hash" ]; then
    point_current
    echo "env.sh: $venv is complete"
    exit 0
fi

requirements=$(grep -v '^[[:space:]]*$' || true)
[ -n "$requirements" ] || { echo "env.sh: no packages on stdin" >&2; exit 2; }
mkdir -p "$base"
rm -rf "$venv"
"$python" -m venv "$venv"
printf '%s\n' "$requirements" > "$venv/requirements.txt"
"$venv/bin/python" -m pip install --quiet --upgrade pip

shared=""
if [ -n "$cache" ]; then
    mounted=$(dirname "$cache")
    while [ "$mounted" != / ] && ! mountpoint -q "$mounted"; do mounted=$(dirname "$mounted"); done
    if [ "$mounted" != / ]; then
        shared="$cache/$hash"
    else
        echo "env.sh: $cache is not on a mounted file system; installing from the index" >&2
    fi
fi
if [ -n "$shared" ]; then
    mkdir -p "$cache"
    exec 9> "$shared.lock"
    flock 9
    if [ ! -f "$shared/.complete" ]; then
        rm -rf "$shared.part"
        "$venv/bin/python" -m pip download --quiet -d "$shared.part" -r "$venv/requirements.txt"
        touch "$shared.part/.complete"
        mv -T "$shared.part" "$shared"
    fi
    flock -u 9
    "$venv/bin/python" -m pip install --quiet --no-index --find-links "$shared" \
        -r "$venv/requirements.txt"
else
    "$venv/bin/python" -m pip install --quiet -r "$venv/requirements.txt"
fi
printf '%s\n' "$hash" > "$marker"
if [ -z "$root" ]; then chown -R "$owner:" "$venv"; fi
point_current
echo "env.sh: built $venv"
