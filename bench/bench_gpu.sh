#!/usr/bin/env bash
# usage: bench/bench_gpu.sh [--python PY] [--mb N] [--steps N] [--wheels DIR] [--instance-type T]
# The GPU checks of the training issue, for a machine with NVIDIA GPUs (a node of
# examples/torchrun-g5.yaml, or any GPU host), from the repository root:
#   1. nvidia-smi: the GPUs, the driver, the CUDA version it supports;
#   2. the torchrun example on every GPU here with NCCL: torchrun --standalone
#      --nproc-per-node G examples/torchrun_ddp.py --backend nccl --bench-mb N, under PY
#      (a python with CUDA torch; default python3): every rank's OK line and the
#      all_reduce bus bandwidth;
#   3. mxnet-cu112 in a virtualenv of its own (from the package index, or --wheels DIR
#      where the machine has no network): import, an NDArray on gpu(0), a matmul checked
#      against numpy; on a GPU newer than CUDA 11.2 (Hopper sm_90, Ada sm_89) this is
#      expected to fail, which is what clusterkit's warning says;
#   4. with --instance-type T: clusterkit validate of a spec pinning mxnet-cu112 on T
#      (the warning, or none).
# One summary line per part at the end; exit 1 when nvidia-smi or the NCCL run failed.
set -euo pipefail
usage="usage: bench/bench_gpu.sh [--python PY] [--mb N] [--steps N] [--wheels DIR] [--instance-type T]"
py=python3 mb=256 steps=20 wheels="" itype=""
while [ $# -gt 0 ]; do
    case "$1" in
        --python) py=${2:?$usage}; shift 2;;
        --mb) mb=${2:?$usage}; shift 2;;
        --steps) steps=${2:?$usage}; shift 2;;
        --wheels) wheels=${2:?$usage}; shift 2;;
        --instance-type) itype=${2:?$usage}; shift 2;;
        -h|--help) echo "$usage"; exit 0;;
        *) echo "$usage" >&2; exit 2;;
    esac
done
[[ $mb =~ ^[0-9]+$ && $steps =~ ^[0-9]+$ ]] || { echo "$usage" >&2; exit 2; }
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf -- "$work"' EXIT
summary=()

echo "== 1. GPUs"
if ! nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader \
        | tee "$work/gpus"; then
    echo "bench_gpu: nvidia-smi failed: no NVIDIA GPU or driver here" >&2
    exit 1
fi
gpus=$(wc -l < "$work/gpus")
cuda=$(nvidia-smi | sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' | head -n 1)
summary+=("gpus: $gpus x $(cut -d, -f2 "$work/gpus" | head -n 1 | xargs), driver CUDA ${cuda:-?}")

echo "== 2. torchrun, NCCL, $gpus process(es), all_reduce of $mb MiB"
start=$(date +%s%N)
nccl=ok
"$py" -m torch.distributed.run --standalone --nproc-per-node "$gpus" \
    examples/torchrun_ddp.py --backend nccl --steps "$steps" --bench-mb "$mb" \
    --out "$work/ddp" 2>&1 | tee "$work/ddp.log" || nccl=failed
ms=$(( ($(date +%s%N) - start) / 1000000 ))
oks=$(grep -c ' OK$' "$work/ddp.log" || true)
bw=$(sed -n 's/.*all_reduce \([0-9.]*\) GB\/s.*/\1/p' "$work/ddp.log" | head -n 1)
summary+=("torchrun nccl: $nccl, $oks/$gpus ranks OK, all_reduce ${mb} MiB ${bw:-?} GB/s bus, ${ms} ms in all")

echo "== 3. mxnet-cu112"
mxnet=ok
if python3 -m venv "$work/mx" && "$work/mx/bin/pip" install -q \
        ${wheels:+--no-index --find-links "$wheels"} mxnet-cu112 'numpy<2' >"$work/pip.log" 2>&1; then
    "$work/mx/bin/python" - <<'PY' 2>&1 | tee "$work/mx.log" || mxnet=failed
import mxnet as mx
import numpy as np

a = np.arange(16, dtype="float32").reshape(4, 4)
x = mx.nd.array(a, ctx=mx.gpu(0))
y = mx.nd.dot(x, x).asnumpy()
assert np.allclose(y, a @ a), "wrong result"
print(f"mxnet {mx.__version__} on gpu(0): matmul OK")
PY
else
    mxnet="not installed (see $work/pip.log: no network? --wheels DIR)"
    tail -n 3 "$work/pip.log" || true
fi
summary+=("mxnet-cu112: $mxnet")

if [ -n "$itype" ]; then
    echo "== 4. clusterkit's warning for mxnet-cu112 on $itype"
    sed -e "s/^  instance_types: .*/  instance_types: [$itype]/" \
        -e "s/^  packages: .*/  packages: [mxnet-cu112==1.9.1]/" \
        examples/imagenet-p4d-spot.yaml > "$work/spec.yaml"
    warned=$(clusterkit validate "$work/spec.yaml" 2>&1 | grep -i 'cuda' || true)
    summary+=("clusterkit on $itype: ${warned:-no CUDA warning}")
fi

echo "== summary"
printf '%s\n' "${summary[@]}"
[ "$nccl" = ok ]
