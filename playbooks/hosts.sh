#!/usr/bin/env bash
# usage: hosts.sh --rank N --gpus G [--efs-mount DIR] < BLOCK
# BLOCK (stdin): one line per node, master first: "ADDRESS NAME...".
# Writes, each replaced (never appended to):
#   /etc/hosts               clusterkit's block between "# BEGIN clusterkit" and
#                            "# END clusterkit"; the block's names are removed from every
#                            other line, so each name appears once
#   /etc/clusterkit/hosts    one in-cluster address per line, master first
#   /etc/profile.d/clusterkit.sh  DEEPLEARNING_WORKERS_PATH/_COUNT, DEEPLEARNING_WORKER_GPU_COUNT,
#                            CLUSTERKIT_NODE_RANK, CLUSTERKIT_NUM_NODES, CLUSTERKIT_NODE_IPS
#                            (and EFS_MOUNT with --efs-mount)
# Idempotent. CLUSTERKIT_ROOT=DIR writes under DIR instead of / (tests).
set -euo pipefail
usage="usage: hosts.sh --rank N --gpus G [--efs-mount DIR] < BLOCK"
rank="" gpus="" efs=""
while [ $# -gt 0 ]; do
    case "$1" in
        --rank) rank=${2:?$usage}; shift 2;;
        --gpus) gpus=${2:?$usage}; shift 2;;
        --efs-mount) efs=${2:?$usage}; shift 2;;
        -h|--help) echo "$usage"; exit 0;;
        *) echo "$usage" >&2; exit 2;;
    esac
done
[[ $rank =~ ^[0-9]+$ && $gpus =~ ^[0-9]+$ ]] || { echo "$usage" >&2; exit 2; }
root=${CLUSTERKIT_ROOT:-}
begin="# BEGIN clusterkit (managed by clusterkit hosts.sh; replaced on every run)"
end="# END clusterkit"

put() {  # put FILE: stdin -> FILE when it differs (atomic; mode 644)
    local target=$1 tmp
    mkdir -p "${target%/*}"
    tmp=$(mktemp "$target.XXXXXX")
    cat > "$tmp"
    if cmp -s "$tmp" "$target"; then rm -f "$tmp"; return; fi
    chmod 644 "$tmp"
    mv -f "$tmp" "$target" 2>/dev/null || { cat "$tmp" > "$target"; rm -f "$tmp"; }
}

block=""
addresses=()
while read -r address names; do
    [ -n "$address" ] || continue
    if ! [[ $address =~ ^[0-9A-Fa-f.:]+$ && $names =~ ^[A-Za-z0-9.-]+([[:space:]]+[A-Za-z0-9.-]+)*$ ]]; then
        echo "hosts.sh: bad line on stdin: $address $names" >&2
        exit 2
    fi
    block+="$address $names"$'\n'
    addresses+=("$address")
done
[ ${#addresses[@]} -gt 0 ] || { echo "hosts.sh: no nodes on stdin" >&2; exit 2; }
[ "$rank" -lt ${#addresses[@]} ] || { echo "hosts.sh: rank $rank of ${#addresses[@]} nodes" >&2; exit 2; }

hosts="$root/etc/hosts"
touch "$hosts"
{
    awk -v begin="# BEGIN clusterkit" -v end="$end" -v block="$block" '
        BEGIN { n = split(block, lines, "\n")
                for (i = 1; i <= n; i++) { m = split(lines[i], w, /[ \t]+/)
                                           for (j = 2; j <= m; j++) ours[w[j]] = 1 } }
        index($0, begin) == 1 { skip = 1; next }
        skip && index($0, end) == 1 { skip = 0; next }
        skip { next }
        /^[ \t]*#/ || NF < 2 { print; next }
        { out = $1; kept = 0; dropped = 0
          for (i = 2; i <= NF; i++) {
              if (substr($i, 1, 1) == "#") { for (; i <= NF; i++) out = out " " $i; break }
              if ($i in ours) dropped++; else { out = out " " $i; kept++ } }
          if (!dropped) print; else if (kept) print out }
    ' "$hosts"
    printf '%s\n%s%s\n' "$begin" "$block" "$end"
} | put "$hosts"

printf '%s\n' "${addresses[@]}" | put "$root/etc/clusterkit/hosts"

ips=$(IFS=,; echo "${addresses[*]}")
{
    echo "# written by clusterkit hosts.sh; overwritten on every run"
    echo "export DEEPLEARNING_WORKERS_PATH=/etc/clusterkit/hosts"
    echo "export DEEPLEARNING_WORKERS_COUNT=${#addresses[@]}"
    echo "export DEEPLEARNING_WORKER_GPU_COUNT=$gpus"
    echo "export CLUSTERKIT_NODE_RANK=$rank"
    echo "export CLUSTERKIT_NUM_NODES=${#addresses[@]}"
    echo "export CLUSTERKIT_NODE_IPS=$ips"
    if [ -n "$efs" ]; then printf 'export EFS_MOUNT=%q\n' "$efs"; fi
} | put "$root/etc/profile.d/clusterkit.sh"
