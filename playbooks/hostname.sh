#!/usr/bin/env bash
# usage: hostname.sh NAME
# Sets the node's hostname to NAME now and across reboots: /etc/hostname, and (where
# cloud-init runs) preserve_hostname so cloud-init does not set it back. Idempotent.
# CLUSTERKIT_ROOT=DIR writes the files under DIR and leaves the running hostname alone.
set -euo pipefail
usage="usage: hostname.sh NAME"
case "${1:-}" in -h|--help) echo "$usage"; exit 0;; esac
[ $# -eq 1 ] || { echo "$usage" >&2; exit 2; }
name=$1
[[ $name =~ ^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$ ]] \
    || { echo "hostname.sh: not a host name: $name" >&2; exit 2; }
root=${CLUSTERKIT_ROOT:-}

put() {  # put FILE: stdin -> FILE when it differs (atomic; mode 644)
    local target=$1 tmp
    mkdir -p "${target%/*}"
    tmp=$(mktemp "$target.XXXXXX")
    cat > "$tmp"
    if cmp -s "$tmp" "$target"; then rm -f "$tmp"; return; fi
    chmod 644 "$tmp"
    mv -f "$tmp" "$target" 2>/dev/null || { cat "$tmp" > "$target"; rm -f "$tmp"; }
}

printf '%s\n' "$name" | put "$root/etc/hostname"
if [ -d "$root/etc/cloud/cloud.cfg.d" ]; then
    printf '# written by clusterkit hostname.sh\npreserve_hostname: true\n' \
        | put "$root/etc/cloud/cloud.cfg.d/99-clusterkit-hostname.cfg"
fi
if [ -z "$root" ] && [ "$(hostname)" != "$name" ]; then
    hostnamectl set-hostname "$name" 2>/dev/null || hostname "$name"
fi
