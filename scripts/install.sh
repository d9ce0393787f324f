#!/usr/bin/env bash
# Install everything clusterkit, its tests and its sandbox need on a fresh Debian/Ubuntu
# machine: the OS packages of scripts/tools.txt (as root, with apt-get) and a virtual
# environment in .venv with the pip-installed tools. Ends by checking every listed tool.
set -euo pipefail
cd "$(dirname "$0")/.."
TOOLS=scripts/tools.txt
PY="${PYTHON:-python3}"

# on PATH, or in an sbin directory a non-root PATH may lack
have() {
    command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ] || [ -x "/sbin/$1" ]
}

# the packages of the apt tools in scripts/tools.txt that are missing, once each
missing_apt_packages() {
    local tool how package _ seen=" "
    while read -r tool how package _; do
        case "$tool" in '' | '#'*) continue ;; esac
        [ "$how" = apt ] || continue
        [ "$tool" = python3 ] && tool="$PY"
        have "$tool" && continue
        case "$seen" in *" $package "*) continue ;; esac
        seen="$seen$package "
        echo "$package"
    done <"$TOOLS"
}

mapfile -t need_apt < <(missing_apt_packages)
# Debian/Ubuntu ship venv/ensurepip separately (python3-venv)
"$PY" -c 'import ensurepip, venv' >/dev/null 2>&1 || need_apt+=(python3-venv)
if [ "${#need_apt[@]}" -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "install: need root to apt-get install ${need_apt[*]}" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then
    echo "install: clusterkit needs Python >= 3.10 ($PY is $("$PY" -V 2>&1))" >&2
    echo "install: set PYTHON=/path/to/python3.10+ and run again" >&2
    exit 1
fi
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[mxnet,test]'

# every apt and pip tool of the list is there now, or the install failed
absent=()
while read -r tool how package _; do
    case "$tool" in '' | '#'*) continue ;; esac
    case "$how" in
        apt) [ "$tool" = python3 ] || have "$tool" || absent+=("$tool ($package)") ;;
        pip) [ -x ".venv/bin/$tool" ] || absent+=("$tool (pip $package)") ;;
    esac
done <"$TOOLS"
if [ "${#absent[@]}" -gt 0 ]; then
    echo "install: still missing after the install: ${absent[*]}" >&2
    exit 1
fi
echo "install: ok ($(.venv/bin/clusterkit --version))"
