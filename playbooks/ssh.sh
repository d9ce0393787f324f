#!/usr/bin/env bash
# usage: ssh.sh --user USER [--port PORT] < KNOWN_HOSTS
# KNOWN_HOSTS (stdin): the cluster's pinned host keys, one line per node:
#   "NAME,NAME,...,ADDRESS KEYTYPE BASE64" (names as "[NAME]:PORT" off port 22).
# Writes /etc/clusterkit/known_hosts (replaced) and a block in USER's ~/.ssh/config between
# "# BEGIN clusterkit" and "# END clusterkit" (replaced, first in the file) for every
# name and address there: User, Port, ForwardAgent yes, StrictHostKeyChecking yes,
# UserKnownHostsFile /etc/clusterkit/known_hosts. No private key is read or written:
# from the master, `ssh deeplearning-worker1` authenticates with the forwarded agent.
# USER's ~/.ssh is USER's: it is written as USER (runuser), never by root, and a
# symbolic link at ~/.ssh or ~/.ssh/config is refused, not followed. Idempotent. CLUSTERKIT_ROOT=DIR writes under DIR (USER's home: DIR/home/USER) (tests).
set -euo pipefail
usage="usage: ssh.sh --user USER [--port PORT] < KNOWN_HOSTS"
user="" port=22
while [ $# -gt 0 ]; do
    case "$1" in
        --user) user=${2:?$usage}; shift 2;;
        --port) port=${2:?$usage}; shift 2;;
        -h|--help) echo "$usage"; exit 0;;
        *) echo "$usage" >&2; exit 2;;
    esac
done
[[ $user =~ ^[a-z_][a-z0-9_-]*$ && $port =~ ^[0-9]+$ ]] || { echo "$usage" >&2; exit 2; }
root=${CLUSTERKIT_ROOT:-}
if [ -n "$root" ]; then
    home="$root/home/$user"
else
    home=$(getent passwd "$user" | cut -d: -f6)
    [ -n "$home" ] || { echo "ssh.sh: no user $user on this node" >&2; exit 1; }
fi

no_links() {  # no_links PATH BASE: exit 1 when PATH or a directory up to BASE is a link
    local p=$1
    while [ -n "$p" ] && [ "$p" != "$2" ] && [ "$p" != / ]; do
        if [ -L "$p" ]; then
            echo "ssh.sh: $p is a symbolic link; refusing to write through it" >&2
            exit 1
        fi
        p=${p%/*}
    done
}

as_user() {  # as_user CMD...: CMD as USER (root never writes into USER's home)
    if [ -z "$root" ] && [ "$(id -u)" -eq 0 ] && [ "$(id -u "$user")" -ne 0 ]; then
        runuser -u "$user" -- "$@"
    else
        "$@"
    fi
}

put() {  # put FILE MODE: stdin -> FILE when it differs (atomic)
    local target=$1 mode=$2 tmp
    mkdir -p "${target%/*}"
    tmp=$(mktemp "$target.XXXXXX")
    cat > "$tmp"
    if cmp -s "$tmp" "$target"; then rm -f "$tmp"; return; fi
    chmod "$mode" "$tmp"
    mv -f "$tmp" "$target"
}

# One awk pass checks every line and lists the host names once each (a bash loop over
# the lines cost ~50 ms per node at 64 nodes).
known=$(cat)
names=$(printf '%s\n' "$known" | awk '
    NF == 0 { next }
    NF != 3 || $2 !~ /^(ssh|ecdsa|sk)-[A-Za-z0-9@.-]+$/ || $3 !~ /^[A-Za-z0-9+\/]+=*$/ {
        print "ssh.sh: not a known_hosts line (NAMES KEYTYPE BASE64) on stdin" > "/dev/stderr"
        exit 2
    }
    {
        n = split($1, each, ",")
        for (i = 1; i <= n; i++) {
            name = each[i]; sub(/^\[/, "", name); sub(/\]:.*$/, "", name)
            if (name !~ /^[A-Za-z0-9.:-]+$/) {
                print "ssh.sh: bad host name " name > "/dev/stderr"; exit 2
            }
            if (!(name in seen)) { seen[name] = 1; printf "%s ", name }
        }
    }') || exit 2
read -ra hosts <<< "$names"
[ ${#hosts[@]} -gt 0 ] || { echo "ssh.sh: no host keys on stdin" >&2; exit 2; }
known=$(printf '%s\n' "$known" | awk 'NF { print $1, $2, $3 }')$'\n'

printf '%s' "$known" | put "$root/etc/clusterkit/known_hosts" 644

config="$home/.ssh/config"
no_links "$config" "$home"
as_user mkdir -p "$home/.ssh"
as_user chmod 700 "$home/.ssh"
as_user touch "$config"
no_links "$config" "$home"
{
    echo "# BEGIN clusterkit (managed by clusterkit ssh.sh; replaced on every run)"
    echo "Host ${hosts[*]}"
    echo "    User $user"
    echo "    Port $port"
    echo "    ForwardAgent yes"
    echo "    StrictHostKeyChecking yes"
    echo "    UserKnownHostsFile /etc/clusterkit/known_hosts"
    echo "# END clusterkit"
    as_user cat "$config" | awk 'index($0, "# BEGIN clusterkit") == 1 { skip = 1; next }
         skip && index($0, "# END clusterkit") == 1 { skip = 0; next }
         !skip'
} | as_user bash -c "$(declare -f put); put \"\$1\" 600" ssh.sh "$config"
