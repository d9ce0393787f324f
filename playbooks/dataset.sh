#!/usr/bin/env bash
# usage: dataset.sh --mount DIR --volume VOL [--verify size|full] [--manifest-sha256 HEX] [--prewarm] [--wait S]
# Mounts the dataset clone VOL (vol-...; found by id at /dev/disk/by-id/
# nvme-Amazon_Elastic_Block_Store_vol..., never by /dev/xvdf) read-only with noatime on
# DIR, then checks it against DIR/.clusterkit-manifest.json: the manifest's own sha256
# (when HEX is given), then every file's size (size) or sha256 (full), in parallel.
# Another read-only mount on DIR (the clone of a previous snapshot) is unmounted first;
# a read-write one is refused. --prewarm reads every block of the volume once (parallel
# readers) before verifying. No fstab entry: bootstrap mounts it again after a start.
# Waits up to S seconds (default 30) for the device to appear after an attach.
# Last line on success: "dataset: verified N files, SIZE (MODE) manifest sha256:HEX12".
# Exit 1 with "dataset: MISMATCH PATH: WHAT" lines when the copy differs. Idempotent.
set -euo pipefail
usage="usage: dataset.sh --mount DIR --volume VOL [--verify size|full] [--manifest-sha256 HEX] [--prewarm] [--wait S]"
manifest_name=.clusterkit-manifest.json
mnt="" vol="" verify=size want="" prewarm=0 wait_s=30
while [ $# -gt 0 ]; do
    case "$1" in
        --mount) mnt=${2:?$usage}; shift 2;;
        --volume) vol=${2:?$usage}; shift 2;;
        --verify) verify=${2:?$usage}; shift 2;;
        --manifest-sha256) want=${2:?$usage}; shift 2;;
        --prewarm) prewarm=1; shift;;
        --wait) wait_s=${2:?$usage}; shift 2;;
        -h|--help) echo "$usage"; exit 0;;
        *) echo "$usage" >&2; exit 2;;
    esac
done
[[ $mnt == /?* && $mnt != *[[:space:]]* && $vol =~ ^vol-([0-9a-f]{8}|[0-9a-f]{17})$ \
   && $verify =~ ^(size|full)$ && $wait_s =~ ^[0-9]+$ && $mnt/ != */../* ]] \
    || { echo "$usage" >&2; exit 2; }
[[ -z $want || $want =~ ^[0-9a-f]{64}$ ]] || { echo "dataset.sh: bad --manifest-sha256" >&2; exit 2; }
mnt=${mnt%/}
case "$mnt" in  # a read-only volume over one of these would hide the system
    /bin|/boot|/dev|/etc|/home|/lib|/lib32|/lib64|/opt|/proc|/root|/run|/sbin|/srv|/sys|/tmp|/usr|/var)
        echo "dataset.sh: refusing to mount a dataset on $mnt" >&2; exit 2;;
esac
dev=/dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_${vol//-/}

# 0.1 s steps: the device often shows a moment after the attach, rarely seconds after
for _ in $(seq $((wait_s * 10))); do [ -b "$dev" ] && break; sleep 0.1; done
if [ ! -b "$dev" ]; then
    echo "dataset: volume $vol is not visible on this node ($dev): is the volume" \
         "attached? clusterkit status" >&2
    exit 1
fi
majmin() { printf '%d:%d' "0x$(stat -L -c %t "$1")" "0x$(stat -L -c %T "$1")"; }

mounted=0
while mountpoint -q "$mnt"; do  # the top mount is what readers see
    shown=$(findmnt -n -o SOURCE,MAJ:MIN,OPTIONS --mountpoint "$mnt" | tail -n 1)
    read -r source held opts <<< "$shown"
    if [ "$held" = "$(majmin "$dev")" ] && [[ ,$opts, == *,ro,* ]]; then
        echo "dataset: $vol is mounted on $mnt"
        mounted=1
        break
    elif [[ ,$opts, == *,ro,* ]]; then
        echo "dataset: $mnt holds $source (an earlier dataset), unmounting it for $vol"
        umount "$mnt" || { echo "dataset: cannot unmount $mnt: busy? see fuser -vm $mnt" >&2
                           exit 1; }
    else
        echo "dataset: $mnt holds $source read-write, not a dataset clone; leaving it." \
             "Unmount it or choose another storage.dataset.mount" >&2
        exit 1
    fi
done
if [ "$mounted" = 0 ]; then
    mkdir -p "$mnt"
    mount -o ro,noatime "$dev" "$mnt"
    echo "dataset: mounted $vol ($dev) on $mnt read-only"
fi

if [ "$prewarm" = 1 ]; then
    # parallel readers, like AWS's fio recipe: the first read of a block of a clone is
    # slow (fetched from S3), later ones run at the volume's speed
    size=$(blockdev --getsize64 "$dev") jobs=8 mib=$((1 << 20))
    per=$(( (size / mib + jobs - 1) / jobs ))
    start=$(date +%s%N)
    pids=()
    for i in $(seq 0 $((jobs - 1))); do
        dd if="$dev" of=/dev/null bs=1M skip=$((i * per)) count="$per" iflag=direct \
           status=none & pids+=($!)
    done
    for pid in "${pids[@]}"; do
        wait "$pid" || { echo "dataset: prewarm: reading $dev failed" >&2; exit 1; }
    done
    ns=$(( $(date +%s%N) - start + 1 ))
    echo "dataset: prewarmed $((size / 1000000)) MB in $((ns / 1000000)) ms" \
         "($((size * 1000 / ns)) MB/s)"
fi

python3 - "$mnt/$manifest_name" "$verify" "$want" <<'PY'
import hashlib, json, os, sys
from concurrent.futures import ThreadPoolExecutor

manifest, mode, want = sys.argv[1], sys.argv[2], sys.argv[3]
root = os.path.dirname(manifest)
SHOWN = 5


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def human(n):
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000


def check(entry):
    rel = entry.get("path")
    if not isinstance(rel, str) or rel.startswith("/") or ".." in rel.split("/") or not rel:
        return f"{rel!r}: not a relative path inside the dataset"
    path = os.path.join(root, rel)
    try:
        st = os.lstat(path)
    except OSError:
        return f"{rel}: missing"
    if not os.path.isfile(path) or os.path.islink(path):
        return f"{rel}: not a regular file"
    if st.st_size != entry.get("size"):
        return f"{rel}: size {st.st_size}, manifest says {entry.get('size')}"
    if mode == "full":
        got = sha256(path)
        if got != entry.get("sha256"):
            return f"{rel}: sha256 {got[:12]}, manifest says {str(entry.get('sha256'))[:12]}"
    return None


try:
    own = sha256(manifest)
    with open(manifest, "rb") as handle:
        data = json.load(handle)
except (OSError, ValueError) as exc:
    sys.exit(f"dataset: MISMATCH {os.path.basename(manifest)}: unreadable ({exc})")
if want and own != want:
    sys.exit(f"dataset: MISMATCH {os.path.basename(manifest)}: sha256 {own[:12]}, the "
             f"snapshot's tag says {want[:12]} (not the published dataset)")
files = data.get("files") if isinstance(data, dict) else None
if not isinstance(files, list) or data.get("version") != 1 or not all(
        isinstance(f, dict) and isinstance(f.get("size"), int) for f in files):
    sys.exit(f"dataset: MISMATCH {os.path.basename(manifest)}: not a version 1 manifest")
total = sum(f["size"] for f in files)
if data.get("total_bytes") != total:
    sys.exit(f"dataset: MISMATCH {os.path.basename(manifest)}: total_bytes "
             f"{data.get('total_bytes')}, its files add up to {total}")
with ThreadPoolExecutor(max_workers=min(32, 4 * (os.cpu_count() or 1))) as pool:
    problems = [p for p in pool.map(check, files) if p]
for problem in problems[:SHOWN]:
    print(f"dataset: MISMATCH {problem}")
if len(problems) > SHOWN:
    print(f"dataset: ... and {len(problems) - SHOWN} more mismatches")
if problems:
    sys.exit(1)
print(f"dataset: verified {len(files)} files, {human(total)} "
      f"({'sha256' if mode == 'full' else 'size'}) manifest sha256:{own[:12]}")
PY
