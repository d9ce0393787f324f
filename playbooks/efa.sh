#!/usr/bin/env bash
# usage: efa.sh [--remove] < PROFILE
# Writes PROFILE (stdin: comment lines and `export NAME=VALUE` lines, values as Python's
# shlex.quote writes them) to /etc/profile.d/clusterkit-efa.sh, mode 644, atomically,
# when the file differs; --remove deletes it. Every login shell and every job process of
# clusterkit's supervisor reads it. Idempotent.
# CLUSTERKIT_ROOT=DIR writes under DIR instead of / (tests).
set -euo pipefail
usage="usage: efa.sh [--remove] < PROFILE"
remove=false
case "${1:-}" in
    -h|--help) echo "$usage"; exit 0;;
    --remove) remove=true; shift;;
esac
[ $# -eq 0 ] || { echo "$usage" >&2; exit 2; }
target="${CLUSTERKIT_ROOT:-}/etc/profile.d/clusterkit-efa.sh"
if [ -L "$target" ] || { [ -e "$target" ] && [ ! -f "$target" ]; }; then
    echo "efa.sh: $target is not a plain file; clusterkit leaves it alone" >&2
    exit 1
fi
if $remove; then
    rm -f "$target"
    exit 0
fi

# The file is sourced by every login shell, root's too: only comments, and exports of
# plain names whose values are safe words or single-quoted strings, are taken.
value="([A-Za-z0-9_@%+=:,./-]|'[^']*'|\"'\")*"
export_re="^export [A-Za-z_][A-Za-z0-9_]*=${value}\$"
mkdir -p "${target%/*}"
tmp=$(mktemp "$target.XXXXXX")
trap 'rm -f "$tmp"' EXIT
cat > "$tmp"
[ -s "$tmp" ] || { echo "efa.sh: nothing on stdin" >&2; exit 2; }
while IFS= read -r line || [ -n "$line" ]; do
    if [[ $line != \#* ]] && ! [[ $line =~ $export_re ]]; then
        echo "efa.sh: not a comment or an export of a plain value: $line" >&2
        exit 2
    fi
done < "$tmp"
if cmp -s "$tmp" "$target" && [ "$(stat -c %a "$target")" = 644 ]; then
    exit 0
fi
chmod 644 "$tmp"
mv -f "$tmp" "$target"
