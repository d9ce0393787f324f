#!/usr/bin/env bash
# usage: env.sh --python PYTHON --hash HASH --owner USER [--shared-cache DIR] < PACKAGES
# The training environment: a virtualenv /opt/clusterkit/envs/HASH with the pip
# PACKAGES (stdin, one requirement per line; HASH: their hash, computed by clusterkit),
# and /opt/clusterkit/envs/current pointing at it. A complete env (marker file
# .clusterkit-packages holding HASH, written last) is never rebuilt; a changed package
# list gets a new HASH and a new env. With --shared-cache DIR on a mounted EFS, the
# packages are downloaded once into DIR/HASH (under a lock; the first node downloads,
# the others wait) and every node installs from there without the package index. The
# cache is root's: every directory from the mount down must be a real directory that
# only root writes (else the index is used), and DIR/HASH/SHA256SUMS, written by the
# node that downloaded, must match every file there before pip reads one (else exit 1).
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

make_venv() {  # a new, empty venv with the package list in it (once per run)
    [ -z "${made:-}" ] || return 0
    rm -rf "$venv"
    "$python" -m venv "$venv"
    printf '%s\n' "$requirements" > "$venv/requirements.txt"
    "$venv/bin/python" -m pip install --quiet --upgrade pip
    made=1
}

root_only() {  # root_only MOUNT DIR: MOUNT and each directory down to DIR are real
    # directories of this user's (root's) that no one else may write or move (made
    # so when missing); else 1, saying why
    local p=$1 part mode parts
    IFS=/ read -ra parts <<< "${2#"$1"/}"
    for part in "" "${parts[@]}"; do
        p=${p%/}${part:+/$part}
        [ -e "$p" ] || [ -L "$p" ] || mkdir -m 755 "$p"
        mode=$(stat -c %a "$p")  # others may write only where the sticky bit is set
        if [ -L "$p" ] || [ ! -d "$p" ] || [ "$(stat -c %u "$p")" != "$(id -u)" ] \
            || [ $(( 8#$mode & 8#022 && !(8#$mode & 8#1000) )) -ne 0 ]; then
            echo "env.sh: $p is not a directory only root may change; not using the" \
                "wheel cache, installing from the index" >&2
            return 1
        fi
    done
}

sums_match() {  # sums_match DIR: DIR holds exactly the files its SHA256SUMS lists, intact
    local listed present
    [ -f "$1/SHA256SUMS" ] && (cd "$1" && sha256sum --check --strict --quiet SHA256SUMS) \
        || return 1
    listed=$(cut -d' ' -f3- < "$1/SHA256SUMS" | sort)
    present=$(find "$1" -mindepth 1 ! -name SHA256SUMS ! -name .complete -printf '%f\n' | sort)
    [ "$listed" = "$present" ] && [ -z "$(find "$1" -mindepth 1 ! -type f)" ]
}

shared=""
if [ -n "$cache" ]; then
    mounted=$(dirname "$cache")
    while [ "$mounted" != / ] && ! mountpoint -q "$mounted"; do mounted=$(dirname "$mounted"); done
    if [ "$mounted" = / ]; then
        echo "env.sh: $cache is not on a mounted file system; installing from the index" >&2
    elif root_only "$mounted" "$cache"; then
        shared="$cache/$hash"
    fi
fi
if [ -n "$shared" ]; then
    exec 9> "$shared.lock"
    flock 9
    if [ ! -f "$shared/.complete" ] || [ ! -f "$shared/SHA256SUMS" ]; then
        make_venv
        rm -rf "$shared.part" "$shared"
        "$venv/bin/python" -m pip download --quiet -d "$shared.part" -r "$venv/requirements.txt"
        (cd "$shared.part" && find . -maxdepth 1 -type f -printf '%f\n' | LC_ALL=C sort \
            | xargs -r -d '\n' sha256sum --) > "$shared.sums"
        mv "$shared.sums" "$shared.part/SHA256SUMS"
        touch "$shared.part/.complete"
        mv -T "$shared.part" "$shared"
    fi
    if ! sums_match "$shared"; then
        echo "env.sh: the wheel cache $shared does not match its SHA256SUMS; refusing to" \
            "install from it (remove it to download again: rm -rf $shared)" >&2
        exit 1
    fi
    flock -u 9
    make_venv  # after the check: a cache that fails it leaves no env half-built
    "$venv/bin/python" -m pip install --quiet --no-index --find-links "$shared" \
        -r "$venv/requirements.txt"
else
    make_venv
    "$venv/bin/python" -m pip install --quiet -r "$venv/requirements.txt"
fi
printf '%s\n' "$hash" > "$marker"
if [ -z "$root" ]; then chown -R "$owner:" "$venv"; fi
point_current
echo "env.sh: built $venv"
