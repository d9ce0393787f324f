#!/usr/bin/env bash
# usage: scratch.sh --mount DIR --owner USER DEVICE...
# Scratch space on the instance-store NVMe disks (DEVICE: /dev/disk/by-id/nvme-Amazon_EC2_NVMe_Instance_Storage_*):
#   1 disk  -> an ext4 filesystem (label ck-scratch) on it;
#   N disks -> RAID-0 /dev/md/clusterkit-scratch (mdadm --create --level=0), ext4 on that;
# mounted on DIR with noatime, DIR owned by USER. No fstab entry: instance store is
# blank after a stop/start and a missing disk must not block boot; bootstrap runs this
# again at every boot. After a plain reboot an existing array/filesystem is reused (its
# data kept); a disk holding anything not made here is refused, never overwritten.
# Exit 3 ("not emulated") when N > 1 and this machine has no mdadm or md driver.
# Idempotent.
set -euo pipefail
usage="usage: scratch.sh --mount DIR --owner USER DEVICE..."
label=ck-scratch
md=/dev/md/clusterkit-scratch
mnt="" owner=""
while [ $# -gt 0 ]; do
    case "$1" in
        --mount) mnt=${2:?$usage}; shift 2;;
        --owner) owner=${2:?$usage}; shift 2;;
        -h|--help) echo "$usage"; exit 0;;
        --) shift; break;;
        -*) echo "$usage" >&2; exit 2;;
        *) break;;
    esac
done
[[ $mnt == /?* && -n $owner && $# -gt 0 ]] || { echo "$usage" >&2; exit 2; }
p=$mnt  # root mounts there: never through a link someone else could have planted
while [ -n "$p" ]; do
    [ ! -L "$p" ] \
        || { echo "scratch.sh: $p is a symbolic link; refusing to mount there" >&2; exit 1; }
    p=${p%/*}
done

label_of() { blkid -p -o value -s LABEL "$1" 2>/dev/null || true; }  # -p: no cache
type_of() { blkid -p -o value -s TYPE "$1" 2>/dev/null || true; }
signatures() { wipefs --noheadings "$1" 2>/dev/null || true; }

if mountpoint -q "$mnt"; then
    source=$(findmnt -n -o SOURCE --mountpoint "$mnt")
    if [ "$(label_of "$source")" != "$label" ]; then
        echo "scratch.sh: $mnt already holds $source, not clusterkit's scratch; leaving it" >&2
        exit 1
    fi
    case ",$(findmnt -n -o OPTIONS --mountpoint "$mnt")," in
        *,noatime,*) ;;
        *) mount -o remount,noatime "$mnt";;
    esac
    chown -h "$owner:" "$mnt"
    echo "scratch.sh: $mnt is mounted ($source)"
    exit 0
fi

for dev in "$@"; do
    [ -b "$dev" ] || { echo "scratch.sh: $dev is not a block device" >&2; exit 1; }
done

refuse_foreign() {  # refuse_foreign DEV: exit 1 when DEV holds any signature
    if [ -n "$(signatures "$1")" ]; then
        echo "scratch.sh: $1 holds data not made by clusterkit ($(type_of "$1")); refusing." \
             "Clear it by hand (wipefs -a $1) only if it is yours to lose" >&2
        exit 1
    fi
}

if [ $# -eq 1 ]; then
    dev=$1
else
    if ! command -v mdadm >/dev/null || [ ! -e /proc/mdstat ]; then
        echo "scratch.sh: RAID-0 over $# disks needs mdadm and the md driver: not emulated" \
             "on this machine" >&2
        exit 3
    fi
    if [ ! -e "$md" ]; then
        members=0
        for d in "$@"; do
            if [ "$(type_of "$d")" = linux_raid_member ]; then members=$((members + 1)); fi
        done
        if [ "$members" -eq $# ]; then
            mdadm --assemble "$md" "$@"
        else
            for d in "$@"; do refuse_foreign "$d"; done
            mdadm --create "$md" --run --level=0 --raid-devices=$# --name=clusterkit-scratch "$@"
        fi
    fi
    dev=$md
fi

if [ "$(label_of "$dev")" != "$label" ]; then
    refuse_foreign "$dev"
    mkfs.ext4 -q -F -L "$label" -E nodiscard "$dev"
fi
mkdir -p "$mnt"
mount -o noatime "$dev" "$mnt"
chown -h "$owner:" "$mnt"
echo "scratch.sh: mounted $dev on $mnt ($# disk(s))"
