"""The one error hierarchy. Every error carries a message and a hint; the CLI
prints both (no traceback unless --debug) and exits with ``exit_code``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from clusterkit.remote.results import GroupResult


class ClusterkitError(Exception):
    """Base of every error clusterkit raises on purpose. Exit code 1 (runtime)."""

    exit_code = 1

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message


class UsageError(ClusterkitError):
    """Bad command-line usage. Exit code 2."""

    exit_code = 2


@dataclass(frozen=True)
class SpecIssue:
    """One problem found in a spec file, located by file, line, column and key path."""

    file: str
    line: int
    col: int
    path: str
    message: str
    hint: str | None = None
    level: str = "error"  # "error" | "warning"

    def format(self) -> str:
        where = f"{self.file}:{self.line}:{self.col}"
        key = f" {self.path}:" if self.path else ""
        text = f"{where}: {self.level}:{key} {self.message}"
        if self.hint:
            text += f"\n    hint: {self.hint}"
        return text


class SpecError(ClusterkitError):
    """The spec does not validate. Exit code 2. Carries every located issue."""

    exit_code = 2

    def __init__(self, issues: list[SpecIssue], hint: str | None = None) -> None:
        errors = [i for i in issues if i.level == "error"]
        count = len(errors)
        first = errors[0] if errors else (issues[0] if issues else None)
        head = f"{first.file}: " if first else ""
        super().__init__(f"{head}{count} error(s) in cluster spec", hint)
        self.issues = issues


class ClusterBusyError(ClusterkitError):
    """Another `up` or `down` of the cluster is running (this machine's lock, or its
    stack in progress in AWS): this command changed nothing, so a failed `up` reports no
    "still running ... clusterkit down" (what runs is the other command's)."""


class PlanDriftError(ClusterkitError):
    """The world changed between the plan the user confirmed (or saved) and its apply:
    nothing was changed, and nothing of what runs is this command's to clean up."""


class AwsError(ClusterkitError):
    """An AWS call failed. ``resource`` names the AWS resource or operation."""

    def __init__(self, message: str, hint: str | None = None, *, code: str | None = None,
                 resource: str | None = None) -> None:
        super().__init__(message, hint)
        self.code = code
        self.resource = resource


class CapacityError(AwsError):
    """AWS had no capacity (or price) for one offer; the next candidate may work."""


class QuotaError(AwsError):
    """An account quota stops the launch; trying other offers will not help."""


class CredentialsError(AwsError):
    """Missing or rejected AWS credentials."""


class RemoteError(ClusterkitError):
    """An SSH step failed: a node could not be reached, or refused. ``results``: what
    each node said (e.g. the SSH probe's reason per silent node), for --json."""

    def __init__(self, message: str, hint: str | None = None, *,
                 results: Mapping[str, object] | None = None) -> None:
        super().__init__(message, hint)
        self.results = dict(results or {})


class GroupError(RemoteError):
    """A fan-out failed on at least one node; ``group`` is the whole ``GroupResult`` (the
    nodes that succeeded too), so partial success is never lost (Fabric's
    GroupException). Raised by ``remote.fanout.run_all`` once every node has finished."""

    def __init__(self, group: GroupResult) -> None:
        failed = group.failed
        why = "; ".join(f"{label} ({r.reason})" for label, r in failed.items())
        hints = list(dict.fromkeys(r.hint for r in failed.values() if r.hint))
        super().__init__(f"command failed on {len(failed)} of {len(group)} node(s): {why}",
                         " / ".join(hints) or "each node's output is above; --json prints "
                         "every node's result", results=group.as_dict())
        self.group = group


class NetworkSafetyError(ClusterkitError):
    """Sandbox mode refused a connection to an address outside 127.0.0.0/8."""


class SandboxError(ClusterkitError):
    """The local sandbox is not running or could not do what was asked."""

    @classmethod
    def not_running(cls, detail: str) -> SandboxError:
        """The sandbox is not running (``detail``: how that was found), with the hint
        every command gives for it."""
        return cls(f"the sandbox is not running ({detail})",
                   "start it with `clusterkit sandbox start`")


class NotEmulated(ClusterkitError):
    """A step the sandbox cannot emulate on this machine (no md driver, not root...)."""
