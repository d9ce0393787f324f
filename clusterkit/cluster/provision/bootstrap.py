"""The bootstrap stage of `up`: what bootstrap needs to know of the cluster, composed from
the running nodes (in-cluster addresses through the address hook, host keys from the
cluster's record, each node's instance type, GPUs from the catalog, the EFS id from the
stack), then
``bootstrap.run`` over the fan-out, every node at once."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from clusterkit.bootstrap import run, steps
from clusterkit.bootstrap.run import BootstrapResult, Outcome
from clusterkit.catalog.instances import lookup as instance_type
from clusterkit.cluster.access.remote_ops import spec_login
from clusterkit.cluster.runtime import Runtime
from clusterkit.errors import ClusterkitError, UsageError
from clusterkit.events import Stage
from clusterkit.plan.provision import ProvisionRecord
from clusterkit.remote import known_hosts
from clusterkit.remote.address import ssh_address, targets
from clusterkit.spec.model import Spec


def check_steps(force: Sequence[str]) -> None:
    """UsageError (exit 2) for a --force-step that names no step."""
    unknown = sorted(set(force) - set(steps.STEP_NAMES))
    if unknown:
        raise UsageError(f"no bootstrap step {', '.join(unknown)}",
                         f"--force-step takes one of: {', '.join(steps.STEP_NAMES)}")


def cluster_view(spec: Spec, record: ProvisionRecord, dataset: Any = None,
                 ) -> steps.ClusterView:
    """``record``: the running nodes and the stack. Each node's in-cluster address is the
    one the master dials (the private IP; in the sandbox its loopback address).
    ``dataset``: the cluster's dataset clones (``steps.DatasetView``), if any."""
    nodes = record.nodes
    keys = known_hosts.instance_keys(spec.name)
    missing = [n.instance_id for n in nodes if n.index is None]
    if missing:
        raise ClusterkitError(f"node(s) without an index: {', '.join(missing)}",
                              "run `clusterkit up` again: it writes the missing tags")
    view = tuple(steps.NodeView(n.index or 0, ssh_address(n, via_gateway=True),
                                keys.get(n.instance_id), n.instance_type) for n in nodes)
    itype = instance_type(nodes[0].instance_type) if nodes else None
    extra = {"dataset": dataset} if dataset is not None else {}
    return steps.ClusterView(spec.name, record.region, view,
                             gpus_per_node=itype.gpu_count if itype else 0,
                             efs_id=record.stack.efs_id, **extra)


def summary(result: BootstrapResult) -> str:
    counts = [f"{sum(c[o] for c in result.by_step().values())} {o.value}"
              for o in (Outcome.RAN, Outcome.DONE, Outcome.SKIPPED)]
    return f"{len(result.nodes)} node(s) bootstrapped: step runs " + ", ".join(counts)


def bootstrap_nodes(rt: Runtime, spec: Spec, record: ProvisionRecord, *,
                    force: Sequence[str] = (), timeout: float | None = None,
                    dataset: Any = None) -> BootstrapResult:
    """Every bootstrap step on every node of ``record`` (all running), in parallel;
    raises BootstrapError naming each failed node and step, every node's result kept."""
    check_steps(force)
    ordered = record.nodes
    view = cluster_view(spec, record, dataset)
    login = spec_login(spec)
    rt.started(Stage.BOOTSTRAP, f"bootstrapping {len(ordered)} node(s): "
               f"{', '.join(steps.STEP_NAMES)}"
               + (f" (forced: {', '.join(force)})" if force else ""))
    result = run.run(login, targets(ordered, ordered), spec, view, force=force,
                     report=rt.report, timeout=timeout)
    rt.done(Stage.BOOTSTRAP, summary(result))
    return result
