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
if [ "${#need_apt[@]}" -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "install: need root to apt-get install ${need_apt[*]}" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

PY="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[mxnet,test]'
echo "install: ok ($(.venv/bin/clusterkit --version))"
