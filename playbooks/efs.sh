#!/usr/bin/env bash
# usage: efs.sh [--owner USER] [--type nfs4|efs] [--install-efs-utils] [--options OPTS]
#               DNS_NAME MOUNT
# Mounts the EFS file system DNS_NAME (fs-....efs.REGION.amazonaws.com) on MOUNT: with
# --type efs through amazon-efs-utils' mount.efs (OPTS tls,iam: encrypted in transit,
# authorized by the instance role), else as plain NFSv4.1. --install-efs-utils installs
# amazon-efs-utils first where mount.efs is missing (dnf, yum or apt-get), or stops,
# naming it, before anything is written, where it cannot. One /etc/fstab line for MOUNT
# (replaced, never duplicated) with OPTS (default: AWS's recommended NFS options plus
# _netdev,nofail so a missing network never blocks boot), then mounts it unless it is
# mounted already; a plain NFS mount of DNS_NAME is remounted with TLS when --type efs
# asks for it. A TLS mount shows as 127.0.0.1:/ (the local stunnel). With --owner, the
# file system's root is root's, sticky and writable by USER's group (mode 1775): USER
# writes anything in it but cannot move aside what root keeps there (the wheel cache
# .clusterkit/). Idempotent. CLUSTERKIT_ROOT=DIR looks for mount.efs and the package
# manager under DIR, writes the fstab under DIR and mounts nothing (tests).
set -euo pipefail
usage="usage: efs.sh [--owner USER] [--type nfs4|efs] [--install-efs-utils] [--options OPTS] DNS_NAME MOUNT"
opts="nfsvers=4.1,rsize=1048576,wsize=1048576,hard,timeo=600,retrans=2,noresvport,_netdev,nofail"
owner="" type=nfs4 install=0
while [ $# -gt 0 ]; do
    case "$1" in
        --owner) owner=${2:?$usage}; shift 2;;
        --type) type=${2:?$usage}; shift 2;;
        --options) opts=${2:?$usage}; shift 2;;
        --install-efs-utils) install=1; shift;;
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
[[ $type == nfs4 || $type == efs ]] || { echo "$usage" >&2; exit 2; }
root=${CLUSTERKIT_ROOT:-}
p=$mnt  # root mounts there: never through a link someone else could have planted
while [ -n "$p" ]; do
    [ ! -L "$root$p" ] \
        || { echo "efs.sh: $p is a symbolic link; refusing to mount there" >&2; exit 1; }
    p=${p%/*}
done

have_efs_utils() {
    local p
    for p in /sbin/mount.efs /usr/sbin/mount.efs /usr/local/sbin/mount.efs; do
        [ -x "$root$p" ] && return 0
    done
    return 1
}
cannot_install() {
    echo "efs.sh: a TLS mount needs amazon-efs-utils (mount.efs), which is not on this" \
        "node and cannot be installed here: $1. Use an image that has it (AWS's Deep" \
        "Learning AMIs do) or add it to the image (aws/efs-utils builds a .deb for Debian" \
        "and Ubuntu), or set storage.efs.tls: false to mount plain NFS, unencrypted" >&2
    exit 1
}
install_efs_utils() {
    local m d pm=""
    for m in dnf yum apt-get; do
        for d in /usr/bin /bin /usr/sbin; do
            if [ -z "$pm" ] && [ -x "$root$d/$m" ]; then pm=$root$d/$m; fi
        done
    done
    [ -n "$pm" ] || cannot_install "the node has no dnf, yum or apt-get"
    echo "efs.sh: installing amazon-efs-utils with ${pm##*/}"
    if [[ $pm == */apt-get ]]; then
        export DEBIAN_FRONTEND=noninteractive
        "$pm" install -y -q amazon-efs-utils \
            || { "$pm" update -q && "$pm" install -y -q amazon-efs-utils; } \
            || cannot_install "apt-get found no package amazon-efs-utils"
    else
        "$pm" install -y -q amazon-efs-utils \
            || cannot_install "${pm##*/} found no package amazon-efs-utils"
    fi
    have_efs_utils || cannot_install "the package brought no mount.efs"
}
if [ "$install" = 1 ] && ! have_efs_utils; then
    install_efs_utils
fi

fstab="$root/etc/fstab"
touch "$fstab"
tmp=$(mktemp "$fstab.XXXXXX")
{
    awk -v mnt="$mnt" '$1 !~ /^#/ && $2 == mnt { next } { print }' "$fstab"
    printf '%s:/ %s %s %s 0 0\n' "$dns" "$mnt" "$type" "$opts"
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
    if [[ $fstype == nfs* && $source == 127.0.0.1:/ ]]; then
        echo "efs.sh: $mnt is mounted with TLS (amazon-efs-utils' stunnel)"
    elif [[ $fstype == nfs* && $source != "$dns:/" ]]; then
        echo "efs.sh: $mnt already holds $source, not $dns; leaving it" >&2
        exit 1
    elif [[ $fstype == nfs* && $type == efs ]]; then
        echo "efs.sh: $mnt is mounted without TLS; remounting it with TLS"
        umount "$mnt" || { echo "efs.sh: $mnt is in use; stop what uses it" \
            "(fuser -vm $mnt) and run this again" >&2; exit 1; }
    else
        echo "efs.sh: $mnt is mounted ($source)"
    fi
fi
if ! mountpoint -q "$mnt"; then
    mkdir -p "$mnt"
    # _netdev and nofail are for boot (fstab), not for the mount helper
    now=$(tr ',' '\n' <<< "$opts" | grep -vxE '_netdev|nofail' | paste -sd, -)
    # With iam, a refusal may be only early: `up` gives a node its instance profile once
    # the stack is complete (the launch does not wait for it), and the role's credentials
    # reach the instance metadata seconds later. Tried again for up to a minute.
    tries=1
    [[ $type == efs && ,$now, == *,iam,* ]] && tries=${CLUSTERKIT_EFS_TRIES:-12}
    until mount -t "$type" -o "$now" "$dns:/" "$mnt"; do
        tries=$((tries - 1))
        if [ "$tries" -le 0 ]; then
            [ "$type" = efs ] || echo "efs.sh: a file system whose policy requires TLS" \
                "(the one clusterkit creates) refuses plain NFS: mount it with TLS" \
                "(leave storage.efs.tls at its default, true)" >&2
            exit 1
        fi
        echo "efs.sh: mount refused; the node's role credentials may not be there yet:" \
            "trying again in 5 s ($tries more)" >&2
        sleep 5
    done
    echo "efs.sh: mounted $dns on $mnt ($([ "$type" = efs ] && echo TLS || echo plain NFS))"
fi
if [ -n "$owner" ]; then
    chown -h "root:$(id -gn "$owner")" "$mnt"
    chmod 1775 "$mnt"
fi
