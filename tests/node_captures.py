"""The real node captures tests read (tests/data/node-captures, copies of
../shared/data/node-captures): where they lie, and the NCCL ones by what they show."""

from __future__ import annotations

from pathlib import Path

CAPTURES = Path(__file__).parent / "data" / "node-captures"

P5EN = "nccl-efa.8xH200-p5en-16nics.TRUNCATED.txt"
P4D_EKS = "nccl-efa.p4d.24xlarge.eks.TRUNCATED.txt"
P4D_OFI_140 = "nccl-efa.p4d.24xlarge.ofi-1.4.0.TRUNCATED.txt"
NO_PLUGIN = "nccl-no-plugin.batch-dlami-UNSTATED.txt"
TCP_PROVIDER = "nccl-ofi-tcp-provider.p4d-docker.TRUNCATED.txt"
P4D_INIT_FAILED = "nccl-socket-fallback.p4d.24xlarge.ofi-init-failed.TRUNCATED.txt"
SAGEMAKER_FALLBACK = "nccl-socket-fallback.sagemaker-UNSTATED.TRUNCATED.txt"
PERF_SOCKET = "all_reduce_perf.eks-karpenter-UNSTATED.socket.TRUNCATED.txt"
