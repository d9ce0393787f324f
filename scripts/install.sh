#!/usr/bin/env bash
# Install everything clusterkit, its tests and its sandbox need on a fresh Debian/Ubuntu
# machine: OS packages (as root, with apt-get) and a virtual environment in .venv.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v sshd >/dev/null 2>&1 || [ -x /usr/sbin/sshd ] || need_apt+=(openssh-server)
command -v ssh >/dev/null 2>&1 || need_apt+=(openssh-client)
command -v losetup >/dev/null 2>&1 || need_apt+=(mount)
command -v mkfs.ext4 >/dev/null 2>&1 || need_apt+=(e2fsprogs)
PY="${PYTHON:-python3}"
command -v "$PY" >/dev/null 2>&1 || need_apt+=(python3)
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
echo "install: ok ($(.venv/bin/clusterkit --version))"
