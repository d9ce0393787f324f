"""Bootstrap, the impure part: gather every node's facts in one round trip, plan each
node's steps (``steps.plan_node``, pure), run what is still needed, and report.

Two commands per node at most, whatever the number of steps, on one connection: one
gathers its facts (``facts.gather_script``), then, if it has anything to do, one script
holds its steps in order; each node goes on to its steps as soon as its own facts are
in (``fanout.chain_each``), never waiting for the other nodes. A step's commands run as
root (directly when the login is uid 0, else ``sudo -n``, as in the sandbox); the last
of them writes the step's receipt, so a step that fails leaves none and the next `up`
runs it again. A node stops at its first failed step; the other nodes go on. A step
that exits 3 saying "not emulated" (the sandbox has no md driver) is skipped with that
reason, and the node's later steps still run.
"""

from __future__ import annotations

import shlex
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any

from clusterkit.bootstrap import facts as nf
from clusterkit.bootstrap import steps
from clusterkit.errors import RemoteError
from clusterkit.events import Event, Kind, Reporter, Stage, null_reporter
from clusterkit.plan.nodes import Node
from clusterkit.remote import fanout
from clusterkit.remote.connect import Login, Target
from clusterkit.remote.results import NodeResult
from clusterkit.spec.model import Spec

PARALLEL = 32  # nodes bootstrapped at once
TAIL_LINES = 20  # of a step's output, kept in its result
NOT_EMULATED_EXIT = 3
BEGIN, END = "@@clusterkit-step-begin", "@@clusterkit-step-end"
_ROOT = 'ck_root=; [ "$(id -u)" -eq 0 ] || ck_root="sudo -n"\n'


class Outcome(Enum):
    RAN = "ran"
    DONE = "already done"
    SKIPPED = "skipped"
    FAILED = "failed"
    NOT_RUN = "not run"  # an earlier step of the node failed


@dataclass(frozen=True)
class StepResult:
    step: str
    outcome: Outcome
    reason: str  # why it ran, why nothing was needed, why it was skipped or failed
    output: str = ""  # the tail of what its commands printed (when they ran)
    executed: bool = False  # its commands ran on the node (a step body ran)
    warning: str = ""  # the step's plan warns the user (e.g. EFS without TLS)

    def to_json(self) -> dict[str, Any]:
        return {"step": self.step, "outcome": self.outcome.value, "reason": self.reason,
                "output": self.output, "executed": self.executed, "warning": self.warning}


@dataclass(frozen=True)
class NodeBootstrap:
    """One node's steps in order; ``error``: it could not be reached or gave no answer."""

    node: Node
    label: str
    steps: tuple[StepResult, ...] = ()
    error: str | None = None
    hint: str | None = None

    @property
    def failed_step(self) -> StepResult | None:
        return next((s for s in self.steps if s.outcome is Outcome.FAILED), None)

    @property
    def ok(self) -> bool:
        return self.error is None and self.failed_step is None

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "instance_id": self.node.instance_id,
                "index": self.node.index, "ok": self.ok, "error": self.error,
                "hint": self.hint, "steps": [s.to_json() for s in self.steps]}


@dataclass(frozen=True)
class BootstrapResult:
    """Every node's steps, in node order."""

    nodes: tuple[NodeBootstrap, ...]

    @property
    def ok(self) -> bool:
        return not self.failed

    @property
    def failed(self) -> tuple[NodeBootstrap, ...]:
        return tuple(n for n in self.nodes if not n.ok)

    @property
    def bodies_run(self) -> int:
        """How many step bodies ran, over all nodes (0 on a cluster already set up)."""
        return sum(s.executed for n in self.nodes for s in n.steps)

    def by_step(self) -> dict[str, Counter[Outcome]]:
        """step -> how many nodes had each outcome, in step order."""
        out: dict[str, Counter[Outcome]] = {name: Counter() for name in steps.STEP_NAMES}
        for node in self.nodes:
            for s in node.steps:
                out.setdefault(s.step, Counter())[s.outcome] += 1
        return out

    def reasons(self, step: str, outcome: Outcome) -> list[str]:
        """The distinct reasons of ``step`` with ``outcome``, in node order."""
        return list(dict.fromkeys(s.reason for n in self.nodes for s in n.steps
                                  if s.step == step and s.outcome is outcome))

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "bodies_run": self.bodies_run,
                "nodes": [n.to_json() for n in self.nodes]}


class BootstrapError(RemoteError):
    """A step failed on at least one node (or a node could not be reached); ``result``
    holds every node's steps, the ones that went well too."""

    def __init__(self, result: BootstrapResult) -> None:
        parts = []
        for node in result.failed:
            step = node.failed_step
            if step is None:
                parts.append(f"{node.label}: {node.error}")
            else:
                last = step.output.strip().splitlines()[-1:] or [""]
                parts.append(f"{node.label}: step {step.step} {step.reason}"
                             + (f": {last[0]}" if last[0] else ""))
        # a node's own hint first (a changed host key says how to accept it)
        hints = list(dict.fromkeys(n.hint for n in result.failed if n.hint))
        super().__init__(f"bootstrap failed on {len(result.failed)} of {len(result.nodes)} "
                         f"node(s): " + "; ".join(parts),
                         "; ".join([*hints, "fix the cause shown above, then run `clusterkit "
                                    "up` again: the steps that succeeded left receipts and "
                                    "are not run again"]),
                         results={"bootstrap": result.to_json()})
        self.result = result


# -- the node-side scripts --------------------------------------------------------------------

def gather_command() -> str:
    """The facts of a node, gathered as root in one round trip."""
    script = shlex.quote(nf.gather_script())
    return f'if [ "$(id -u)" -eq 0 ]; then sh -c {script}; else sudo -n sh -c {script}; fi'


def _heredoc(text: str) -> tuple[str, str]:
    """(redirection, body) feeding ``text`` to a command on stdin, quoted (no expansion)."""
    mark = "CK_STDIN"
    while mark in text:
        mark += "_"
    return f"<<'{mark}'", f"{text}{'' if text.endswith(chr(10)) or not text else chr(10)}{mark}\n"


def _command_lines(command: steps.Command, playbooks: Mapping[str, str]) -> str:
    line = "$ck_root " + command.shell(playbooks[command.playbook], sudo="")
    if command.stdin is None:
        return f"  {line} </dev/null\n"
    redirect, body = _heredoc(command.stdin)
    return f"  {line} {redirect}\n{body}"


def node_script(plans: Sequence[steps.StepPlan], playbooks: Mapping[str, str]) -> str:
    """One POSIX-shell script running ``plans`` (those with action "run") in order, each
    step's output between markers with its exit code; it stops at the first step that
    fails (one that exits 3 saying "not emulated" does not stop it)."""
    parts = [_ROOT, 'ck_log=$(mktemp) || exit 1\n']
    for plan in plans:
        body = "".join(_command_lines(c, playbooks) for c in plan.commands)
        parts.append(
            f"printf '%s\\n' '{BEGIN} {plan.step}'\n"
            f"( set -e\n{body}) >\"$ck_log\" 2>&1\n"
            "ck_rc=$?\n"
            f"tail -n {TAIL_LINES} \"$ck_log\"\n"
            f"printf '\\n%s %s %d\\n' '{END}' '{plan.step}' \"$ck_rc\"\n"
            f"if [ \"$ck_rc\" -ne 0 ] && ! {{ [ \"$ck_rc\" -eq {NOT_EMULATED_EXIT} ] && "
            "grep -q 'not emulated' \"$ck_log\"; }; then rm -f \"$ck_log\"; exit 1; fi\n")
    parts.append('rm -f "$ck_log"\n')
    return "".join(parts)


def to_run(plans: Sequence[steps.StepPlan]) -> list[steps.StepPlan]:
    """The steps a node's script runs: those planned "run" before the first one planned
    "fail" (a node stops at its first failed step, whether it failed there or here)."""
    todo = []
    for plan in plans:
        if plan.action == "fail":
            break
        if plan.action == "run":
            todo.append(plan)
    return todo


def parse_run(lines: Sequence[str]) -> dict[str, tuple[int, str]]:
    """``node_script``'s output -> {step: (exit code, output tail)} for each step that
    finished."""
    return {name: (code, "\n".join(body).strip("\n"))
            for name, code, body in nf.sections(lines, BEGIN, END)}


# -- planning and running ----------------------------------------------------------------------

@dataclass(frozen=True)
class _Planned:
    target: Target
    plans: tuple[steps.StepPlan, ...]


def _unreachable(target: Target, res: NodeResult, what: str) -> NodeBootstrap:
    detail = res.error or f"exit {res.exit_code}: {(res.stderr or res.stdout).strip()[-300:]}"
    return NodeBootstrap(target.node, target.hop.label, error=f"{what}: {detail}",
                         hint=res.hint)


def _step_result(plan: steps.StepPlan, finished: Mapping[str, tuple[int, str]],
                 failed_before: bool) -> StepResult:
    result = _outcome(plan, finished, failed_before)
    if plan.warning and result.outcome is not Outcome.NOT_RUN:
        result = replace(result, warning=plan.warning)
    return result


def _outcome(plan: steps.StepPlan, finished: Mapping[str, tuple[int, str]],
             failed_before: bool) -> StepResult:
    if plan.action == "done":
        return StepResult(plan.step, Outcome.DONE, plan.reason)
    if plan.action == "skip":
        return StepResult(plan.step, Outcome.SKIPPED, plan.reason)
    if plan.action == "fail":  # refused while planning: nothing of it ran
        return StepResult(plan.step, Outcome.NOT_RUN if failed_before else Outcome.FAILED,
                          "an earlier step failed" if failed_before else plan.reason)
    if failed_before or plan.step not in finished:
        return StepResult(plan.step, Outcome.NOT_RUN, "an earlier step failed" if failed_before
                          else "the node gave no result for it")
    code, output = finished[plan.step]
    if code == 0:
        return StepResult(plan.step, Outcome.RAN, plan.reason, output, executed=True)
    if code == NOT_EMULATED_EXIT and "not emulated" in output:
        why = next((line for line in output.splitlines() if "not emulated" in line), output)
        return StepResult(plan.step, Outcome.SKIPPED, why.strip(), output, executed=True)
    return StepResult(plan.step, Outcome.FAILED, f"exit {code}", output, executed=True)


def _node_result(item: _Planned, res: NodeResult | None) -> NodeBootstrap:
    target = item.target
    finished = parse_run(res.stdout.splitlines()) if res is not None else {}
    out: list[StepResult] = []
    for plan in item.plans:
        failed = any(s.outcome in (Outcome.FAILED, Outcome.NOT_RUN) for s in out)
        out.append(_step_result(plan, finished, failed))
    error = None
    if res is not None and res.error is not None:  # lost the connection, timed out
        error = f"{res.error} (the steps after the last one reported did not run)"
    return NodeBootstrap(target.node, target.hop.label, tuple(out), error,
                         res.hint if res is not None else None)


def _report(report: Reporter, node: NodeBootstrap) -> None:
    kinds = {Outcome.RAN: Kind.PROGRESS, Outcome.FAILED: Kind.ERROR,
             Outcome.NOT_RUN: Kind.WARNING}
    if node.error is not None:
        report(Event(Kind.ERROR, f"{node.label}: {node.error}", stage=Stage.BOOTSTRAP,
                     node=node.node.instance_id, level=1))
    for s in node.steps:
        text = f"{node.label} {s.step}: {s.outcome.value} ({s.reason})"
        if s.outcome is Outcome.FAILED and s.output:
            text += "\n" + "\n".join(f"    {line}" for line in s.output.splitlines())
        report(Event(kinds.get(s.outcome, Kind.INFO), text, stage=Stage.BOOTSTRAP,
                     node=node.node.instance_id, level=1))
        if s.warning:
            report(Event(Kind.WARNING, f"{node.label} {s.step}: {s.warning}",
                         stage=Stage.BOOTSTRAP, node=node.node.instance_id, level=1))


def run(login: Login, targets: Sequence[Target], spec: Spec, cluster: steps.ClusterView, *,
        force: Sequence[str] = (), report: Reporter = null_reporter,
        playbooks: Mapping[str, str] | None = None, parallel: int = PARALLEL,
        timeout: float | None = None) -> BootstrapResult:
    """Bootstrap the nodes of ``targets`` (the master dialled directly, the workers
    through it); ``force``: steps to run again whatever their receipts say. Each node
    runs its steps as soon as its own facts are in, and is reported when it is done:
    no node waits for another. Raises BootstrapError, carrying every node's result,
    when anything failed."""
    playbooks = playbooks if playbooks is not None else steps.read_playbooks()
    planned: dict[str, _Planned] = {}
    lock, reported = threading.Lock(), set[str]()

    def said(node: NodeBootstrap) -> NodeBootstrap:
        with lock:  # from the node's own thread: one node's lines together, once
            if node.label not in reported:
                reported.add(node.label)
                _report(report, node)
        return node

    def next_command(target: Target, last: NodeResult | None) -> str | None:
        if last is None:
            return gather_command()
        label = target.hop.label
        if label in planned:  # its steps ran
            said(_node_result(planned[label], last))
            return None
        if not last.ok:
            return None  # could not gather facts: reported with the others below
        assert target.node.index is not None
        plans = steps.plan_node(nf.parse_gathered(last.stdout.splitlines()), spec, cluster,
                                target.node.index, playbooks, force)
        planned[label] = _Planned(target, plans)
        todo = to_run(plans)
        if not todo:
            said(_node_result(planned[label], None))
            return None
        return node_script(todo, playbooks)

    with fanout.Connections(login, targets) as pool:  # facts and steps: one handshake
        results = fanout.chain_each(login, targets, next_command, timeout=timeout,
                                    parallel=parallel, pool=pool)
    nodes = []
    for target in targets:  # the nodes whose chain ended early are reported here
        label, ran = target.hop.label, results[target.hop.label]
        nodes.append(said(_node_result(planned[label], ran[1] if len(ran) > 1 else None)
                          if label in planned else
                          _unreachable(target, ran[-1], "could not gather facts")))
    result = BootstrapResult(tuple(nodes))
    if not result.ok:
        raise BootstrapError(result)
    return result

