#!/usr/bin/env bash
# usage: efs.sh [--owner USER] [--options OPTS] DNS_NAME MOUNT
# Mounts the EFS file system DNS_NAME (fs-....efs.REGION.amazonaws.com) on MOUNT over
# NFSv4.1: one /etc/fstab line for MOUNT (replaced, never duplicated) with OPTS (default:
# AWS's recommended options plus _netdev,nofail so a missing network never blocks boot),
# then mounts it unless it is mounted already. With --owner, a root-owned MOUNT is
# handed to USER. Idempotent. CLUSTERKIT_ROOT=DIR writes the fstab under DIR and mounts
# nothing (tests).
set -euo pipefail
usage="usage: efs.sh [--owner USER] [--options OPTS] DNS_NAME MOUNT"
opts="nfsvers=4.1,rsize=1048576,wsize=1048576,hard,timeo=600,retrans=2,noresvport,_netdev,nofail"
owner=""
while [ $# -gt 0 ]; do
    case "$1" in
        --owner) owner=${2:?$usage}; shift 2;;
        --options) opts=${2:?$usage}; shift 2;;
        -h|--help) echo "$usage"; exit 0;;
        -*) echo "$usage" >&2; exit 2;;
        *) break;;
    esac
done
[ $# -eq 2 ] || { echo "$usage" >&2; exit 2; }
dns=$1 mnt=$2
[[ $dns =~ ^fs-[0-9a-f]+\.efs\.[a-z0-9-]+\.amazonaws\.com(\.cn)?$ ]] \
    || { echo "efs.sh: not an EFS DNS name: $dns" >&2; exit 2; }
[[ $mnt == /?* && $mnt != *[[:space:]]* && $opts =~ ^[A-Za-z0-9_=.,-]+$ ]] \
    || { echo "$usage" >&2; exit 2; }
root=${CLUSTERKIT_ROOT:-}

fstab="$root/etc/fstab"
touch "$fstab"
tmp=$(mktemp "$fstab.XXXXXX")
{
    awk -v mnt="$mnt" '$1 !~ /^#/ && $2 == mnt { next } { print }' "$fstab"
    printf '%s:/ %s nfs4 %s 0 0\n' "$dns" "$mnt" "$opts"
} > "$tmp"
if cmp -s "$tmp" "$fstab"; then
    rm -f "$tmp"
else
    chmod 644 "$tmp"
    mv -f "$tmp" "$fstab"
fi
[ -z "$root" ] || exit 0

if mountpoint -q "$mnt"; then
    read -r source fstype < <(findmnt -n -o SOURCE,FSTYPE --mountpoint "$mnt")
    if [[ $fstype == nfs* && $source != "$dns:/" ]]; then
        echo "efs.sh: $mnt already holds $source, not $dns; leaving it" >&2
        exit 1
    fi
    echo "efs.sh: $mnt is mounted ($source)"
else
    mkdir -p "$mnt"
    # _netdev and nofail are for boot (fstab), not for mount.nfs4
    now=$(tr ',' '\n' <<< "$opts" | grep -vxE '_netdev|nofail' | paste -sd, -)
    mount -t nfs4 -o "$now" "$dns:/" "$mnt"
    echo "efs.sh: mounted $dns on $mnt"
fi
if [ -n "$owner" ] && [ "$(stat -c %u "$mnt")" = 0 ]; then
    chown "$owner:" "$mnt"
fi
