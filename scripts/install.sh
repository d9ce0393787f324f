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
# uv installs the packages (from the same index pip uses, the same versions): about 15 s
# where pip took 45 s, most of a clean clone's install. Bytecode is compiled at install
# (where PYTHONDONTWRITEBYTECODE is set, no run would ever cache it), and clusterkit's own
# modules too, which an editable install leaves as source: else every `clusterkit`
# command compiles ~250 modules again (0.4 s of CPU a command). The sandbox is a package
# of its own (sandbox/: `clusterkit sandbox ...`), installed by the same command: the test
# extra needs it by name, and it is on no index. The docs extra builds the site (mkdocs).
[ -x .venv/bin/uv ] || .venv/bin/python -m pip install -q --disable-pip-version-check uv
.venv/bin/uv pip install -q --compile-bytecode --python .venv/bin/python \
    -e '.[mxnet,charts,test,docs]' -e ./sandbox
.venv/bin/python -m compileall -q -j 0 clusterkit sandbox/clusterkit_sandbox >/dev/null

# torch for the torch-marked tests (torchrun, the all-reduce check): a CPU build in a venv
# of its own, kept between runs on this machine (a clean clone reuses it), outside /root,
# /tmp and /home because the sandbox nodes run torch from there and get those dirs empty.
# CLUSTERKIT_TORCH=0 skips it; CLUSTERKIT_TORCH_INDEX is a pip index with CPU builds
# (e.g. https://download.pytorch.org/whl/cpu) where the default index has only CUDA ones.
TORCH_VERSION="$(awk '$1 == "torch" { sub(/^torch==/, "", $3); print $3 }' "$TOOLS")"
torch_home() {
    if [ -n "${CLUSTERKIT_TORCH_HOME:-}" ]; then
        echo "$CLUSTERKIT_TORCH_HOME"
    elif [ "$(id -u)" -eq 0 ]; then
        echo "/var/cache/clusterkit/torch-$TORCH_VERSION"
    else
        echo "${XDG_CACHE_HOME:-$HOME/.cache}/clusterkit/torch-$TORCH_VERSION"
    fi
}

# builds the venv beside its final place and renames it there once torch imports, so an
# interrupted install never leaves a half-made venv under the name the tests look for
install_torch() {
    local home="$1" parent building index=()
    parent="$(dirname "$home")"
    mkdir -p "$parent"
    building="$(mktemp -d "$parent/.building-XXXXXX")"
    chmod 755 "$building"  # mktemp's 0700 would keep the nodes' non-root logins out
    trap 'rm -rf -- "$building"' EXIT
    [ -n "${CLUSTERKIT_TORCH_INDEX:-}" ] && index=(--index-url "$CLUSTERKIT_TORCH_INDEX")
    "$PY" -m venv "$building"
    "$building/bin/python" -m pip install -q --disable-pip-version-check "${index[@]}" \
        "torch==$TORCH_VERSION" numpy
    "$building/bin/python" -c 'import torch' 2>/dev/null
    mv -T "$building" "$home"
    trap - EXIT
}

if [ "${CLUSTERKIT_TORCH:-1}" != 0 ]; then
    home="$(torch_home)"
    if ! "$home/bin/python" -c 'import torch' >/dev/null 2>&1; then
        if [ -e "$home" ]; then
            echo "install: $home exists but does not import torch: remove it, run again" >&2
            exit 1
        fi
        echo "install: torch $TORCH_VERSION (CPU) into $home (once per machine)"
        install_torch "$home"
    fi
    chmod go+rx "$home"  # readable by every login (a sandbox node's ubuntu); 0700 before
    echo "$home/bin/python" >.venv/torch-python  # where the tests find it
else
    rm -f .venv/torch-python
fi

# every apt and pip tool of the list is there now, or the install failed
absent=()
while read -r tool how package _; do
    case "$tool" in '' | '#'*) continue ;; esac
    case "$how" in
        apt) [ "$tool" = python3 ] || have "$tool" || absent+=("$tool ($package)") ;;
        pip) [ -x ".venv/bin/$tool" ] || absent+=("$tool (pip $package)") ;;
        venv) [ "${CLUSTERKIT_TORCH:-1}" = 0 ] || [ -s ".venv/$tool-python" ] ||
            absent+=("$tool (venv $package)") ;;
    esac
done <"$TOOLS"
if [ "${#absent[@]}" -gt 0 ]; then
    echo "install: still missing after the install: ${absent[*]}" >&2
    exit 1
fi
echo "install: ok ($(.venv/bin/clusterkit --version))"
