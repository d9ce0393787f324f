"""`clusterkit train SPEC --nccl-test`: an all-reduce bandwidth test across every node,
started like any job (`train`'s launcher: torchrun, the spec's interpreter and
``train.env``, one process per GPU), its rank 0's table read and weighed against the
type's nominal bandwidth (``training/allreduce.py``).

The test is ``node/nccl_allreduce.py``, shipped in the job's directory and run there:
NVIDIA's ``all_reduce_perf`` spans nodes only through MPI, which clusterkit's launcher
does not use, so this torch.distributed script prints the same table instead (backend
nccl on GPUs, gloo on CPUs: the sandbox). Its NCCL transport is checked as a job's is
(``transport.py``)."""

from __future__ import annotations

import contextlib
import dataclasses
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

from clusterkit.catalog.instances import lookup as instance_type
from clusterkit.cluster.jobs import attempt, transport
from clusterkit.cluster.jobs import nodejobs as jobs
from clusterkit.cluster.jobs.nodejobs import JobCluster, job_dir
from clusterkit.cluster.jobs.results import JobOutcome
from clusterkit.cluster.runtime import Runtime
from clusterkit.errors import UsageError
from clusterkit.events import Stage
from clusterkit.node import nccl_allreduce
from clusterkit.spec.model import Spec, Train
from clusterkit.training import allreduce, topology
from clusterkit.training.allreduce import AllReduceResult, BandwidthVerdict

SCRIPT = Path(nccl_allreduce.__file__).name
# Rank 0's table is ~30 lines plus one per size; the master's stream also carries the
# other local ranks' output. Lines past this are not kept (a runaway log).
MAX_TABLE_LINES = 2000
MAX_BYTES_LIMIT = 8 << 30  # two buffers of this per GPU: beyond it, GPU memory runs out


@dataclass(frozen=True)
class NcclTest:
    """What the test measured and what it looks like."""

    outcome: JobOutcome
    result: AllReduceResult
    verdict: BandwidthVerdict
    instance_type: str
    nodes: int
    efa: bool  # the nodes are expected on EFA (type has it, the spec wants it)
    nominal_gbps: float  # EFA's bandwidth with EFA, else the type's network figure

    def to_json(self) -> dict[str, Any]:
        return {"outcome": self.outcome.to_json(), "instance_type": self.instance_type,
                "nodes": self.nodes, "efa": self.efa, "nominal_gbps": self.nominal_gbps,
                "ranks": len(self.result.ranks),
                "rows": [{"size_bytes": r.size_bytes, "busbw_gbs": r.busbw_gbs,
                          "out_of_place_us": r.out_of_place.time_us,
                          "in_place_us": r.in_place.time_us} for r in self.result.rows],
                "peak_busbw_gbs": self.result.peak_busbw_gbs,
                "avg_busbw_gbs": self.result.avg_busbw_gbs,
                "looks": self.verdict.looks.value, "verdict": self.verdict.summary,
                "findings": list(self.outcome.findings)}


def nccl_spec(spec: Spec) -> Spec:
    """The spec's job as the test runs it: torchrun, one process per GPU (one per node
    on CPUs), the spec's interpreter, packages and environment."""
    train_ = spec.train or Train()
    return dataclasses.replace(spec, train=dataclasses.replace(
        train_, framework="torchrun", workers_per_node=0, command=None))


def nccl_command(max_bytes: int | None) -> str:
    """The script, run by torchrun from the job's directory."""
    if max_bytes is not None and not 8 <= max_bytes <= MAX_BYTES_LIMIT:
        raise UsageError(f"--nccl-max-bytes {max_bytes}: must be 8 B to "
                         f"{MAX_BYTES_LIMIT >> 30} GiB", "e.g. --nccl-max-bytes 1G")
    return f"python3 {SCRIPT}" + (f" --max-bytes {max_bytes}" if max_bytes else "")


def nominal_of(spec: Spec | None, type_name: str) -> tuple[bool, float]:
    """(on EFA, nominal Gbit/s): EFA's bandwidth where the nodes use EFA, else the
    type's network figure (0.0: not in the catalog)."""
    itype = instance_type(type_name)
    efa = transport.expected_efa(spec, type_name) > 0
    if itype is None:
        return efa, 0.0
    return efa, (itype.efa_gbps if efa else itype.network_gbps) or 0.0


def do_nccl_test(spec_file: str, *, max_bytes: int | None = None, replace: bool = False,
                 out: TextIO | None = None, region: str | None = None,
                 profile: str | None = None, rt: Runtime | None = None) -> NcclTest:
    """Run the all-reduce test on every node of the spec's running cluster, read its
    table and weigh its peak bus bandwidth against the type's nominal figure. ``out``
    gets the transport check's lines; Ctrl-C stops the test job."""
    command = nccl_command(max_bytes)  # a bad size is refused before any call
    rt = rt or Runtime.make(region=region, profile=profile)
    jc = jobs.open_job_cluster(rt, spec_file, region, cached=True)
    if jc.spec is None:
        raise UsageError(f"{spec_file}: no spec", "give the cluster's spec file")
    return measure(rt, jc, command, replace=replace, out=out,
                   reopen=lambda: jobs.open_job_cluster(rt, spec_file, region))


def measure(rt: Runtime, jc: JobCluster, command: str, *, replace: bool,
            out: TextIO | None, reopen: Callable[[], JobCluster]) -> NcclTest:
    """The test job (``command``) on every node of ``jc``, followed to its end, its table
    weighed (`--nccl-test`; `train --preflight`'s all-reduce)."""
    assert jc.spec is not None
    spec = nccl_spec(jc.spec)
    with contextlib.ExitStack() as stack:
        jc, ready = attempt.ready_cluster(rt, stack, jc, None, reopen)
        attempt.refuse_running(rt, jc, ready, replace)
        job_id = topology.new_job_id(datetime.now(), secrets.token_hex(2))
        attempt.start(rt, jc, spec, command, job_id, job_dir(job_id), ready.ports,
                    extra={SCRIPT: Path(nccl_allreduce.__file__).read_text()})
        rt.started(Stage.TRAIN, f"all-reduce test {job_id} on {len(jc.targets)} node(s)")
        outcome, table = follow_test(jc, job_id, out)
        rt.done(Stage.TRAIN, f"all-reduce test {job_id}: {outcome.state.value}")
    type_name = jc.nodes[0].instance_type
    efa, nominal = nominal_of(jc.spec, type_name)
    result = allreduce.parse_all_reduce(table)
    return NcclTest(outcome, result, allreduce.bandwidth_verdict(result, nominal, efa=efa),
                    type_name, len(jc.nodes), efa, nominal)


def table_keeper(kept: list[str], watch: transport.TransportWatch | None
                 ) -> Callable[[str, str], None]:
    """The log-line hook: every node's lines that are not NCCL's kept in ``kept`` (rank
    0's table among them: only rank 0 prints, and c10d's rendezvous ranks the nodes by
    their address, so rank 0 is on any node); every line to the transport watcher."""
    def on_line(node: str, text: str) -> None:
        if "NCCL " not in text and len(kept) < MAX_TABLE_LINES:
            kept.append(text)
        if watch is not None:
            watch.add(node, text)

    return on_line


def follow_test(jc: JobCluster, job_id: str,
                out: TextIO | None) -> tuple[JobOutcome, list[str]]:
    """The test job followed to its end (its logs not printed): its outcome and every
    node's lines but NCCL's. Ctrl-C stops it and goes on up."""
    kept: list[str] = []
    watch = transport.watch_for(jc, out)
    try:
        printer = jobs.follow_logs(jc, job_id, keep_following=True, out=None,
                                   on_line=table_keeper(kept, watch),
                                   stop=watch.stop if watch else None)
    except KeyboardInterrupt:
        jobs.stop_job(dataclasses.replace(jc, pool=None), job_id)
        raise
    if watch is not None and watch.stop_reason is not None:
        return transport.stop_off_efa(jc, job_id, watch), kept
    findings = watch.finish() if watch else ()
    return dataclasses.replace(jobs.outcome(jc, job_id, printer), findings=findings), kept
