"""No blind trust on first use: before a node's first host key is pinned, compare it with
the keys the instance printed on its console (cloud-init's keys-to-console block, read
with GetConsoleOutput over the AWS API, not over the address SSH dialled). A key the
console does not show is refused; where the console shows no keys (the image prints
none, or AWS has posted nothing within ``CONSOLE_WAIT``) the key is trusted on first
use, and the user is told so once per node (the next `up` finds it pinned)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from clusterkit.cluster.access import console_keys
from clusterkit.cluster.access.console_keys import ConsoleKeys, Fingerprint, Verdict
from clusterkit.cluster.runtime import Runtime
from clusterkit.errors import AwsError, RemoteError
from clusterkit.events import Stage
from clusterkit.plan.nodes import Node

# cloud-init prints the keys in its final stage, seconds after sshd answers (clusterkit
# sends no user-data that would run before it); AWS posts a non-Nitro console within
# minutes. Past this, a first key is trusted on first use, with a warning.
CONSOLE_WAIT = 90.0
READERS = 16  # GetConsoleOutput calls in flight at once

ConsoleReader = Callable[[Node], str]


def aws_console(rt: Runtime) -> ConsoleReader:
    """Read a node's console output through the runtime's AWS session."""
    from clusterkit.aws import instances  # boto3 only when a console is read (`train`
    # on the nodes `up` last saw imports this module and calls no AWS API)

    return lambda node: instances.console_output(rt.session, node.region, node.instance_id)


@dataclass(frozen=True)
class Console:
    """What one read of a node's console gave: its keys, or why there is nothing to
    compare with (``failed``: the AWS error)."""

    keys: ConsoleKeys
    failed: str = ""

    @property
    def settled(self) -> bool:
        """Reading again cannot change the verdict."""
        return self.keys.printed or self.keys.finished or bool(self.failed)


def _read(reader: ConsoleReader, node: Node) -> Console:
    try:
        return Console(console_keys.parse(reader(node)))
    except AwsError as exc:
        return Console(ConsoleKeys(), f"GetConsoleOutput failed: {exc.message}")


def read_consoles(rt: Runtime, nodes: Sequence[Node], reader: ConsoleReader,
                  wait: float = CONSOLE_WAIT) -> dict[str, Console]:
    """{instance id: Console}; a node whose console shows no keys yet (and no end of
    cloud-init) is read again every ``rt.poll`` seconds for up to ``wait`` seconds."""
    found: dict[str, Console] = {}
    pending = list(nodes)
    start = rt.clock()
    while pending:
        with ThreadPoolExecutor(max_workers=min(READERS, len(pending)),
                                thread_name_prefix="console") as pool:
            read = list(pool.map(lambda n: _read(reader, n), pending))
        found.update({n.instance_id: c for n, c in zip(pending, read, strict=True)})
        pending = [n for n, c in zip(pending, read, strict=True) if not c.settled]
        if not pending or rt.clock() - start >= wait:
            break
        rt.sleep(rt.poll)
    return found


@dataclass(frozen=True)
class ConsoleMismatch:
    """A node presenting a key its instance's console does not show."""

    label: str
    instance_id: str
    presented: str
    printed: tuple[Fingerprint, ...]

    def describe(self) -> str:
        shown = ", ".join(fp.describe() for fp in self.printed)
        return (f"{self.label} ({self.instance_id}) presents "
                f"{console_keys.sha256_fingerprint(self.presented)} "
                f"({console_keys.key_kind(self.presented)}), its console printed {shown}")


def _why_unprinted(console: Console, wait: float) -> str:
    if console.failed:
        return console.failed
    if console.keys.finished:
        return "its console shows no SSH host keys (the image prints none)"
    return f"its console showed no SSH host keys within {wait:.0f} s"


def verify(rt: Runtime, nodes: Sequence[Node], first: Mapping[str, str],
           labels: Mapping[str, str], reader: ConsoleReader | None = None,
           wait: float = CONSOLE_WAIT) -> list[ConsoleMismatch]:
    """Check the keys of ``first`` ({instance id: key}, nodes never pinned) against their
    consoles (``reader``, default: AWS): the mismatches; a warning for each key trusted
    on first use."""
    fresh = [n for n in nodes if n.instance_id in first]
    if not fresh:
        return []
    consoles = read_consoles(rt, fresh, reader or aws_console(rt), wait)
    refused: list[ConsoleMismatch] = []
    matched = 0
    for node in fresh:
        iid, key = node.instance_id, first[node.instance_id]
        console = consoles[iid]
        verdict = console_keys.verify(key, console.keys)
        if verdict is Verdict.MISMATCH:
            refused.append(ConsoleMismatch(labels.get(iid, iid), iid, key,
                                           console_keys.expected(key, console.keys)))
        elif verdict is Verdict.UNPRINTED:
            rt.warn(f"{labels.get(iid, iid)} ({iid}): {_why_unprinted(console, wait)}: "
                    f"trusting its host key {console_keys.sha256_fingerprint(key)} on "
                    "first use", stage=Stage.SSH)
        else:
            matched += 1
    if matched:
        rt.info(f"{matched} new host key(s) match what their instance printed on its "
                "console", level=1, stage=Stage.SSH)
    return refused


def mismatch_error(refused: Sequence[ConsoleMismatch]) -> RemoteError:
    return RemoteError(
        "host key does not match the one the instance printed on its console, refusing "
        "it: " + "; ".join(m.describe() for m in refused),
        "the address SSH dialled may not reach that instance (another machine answers "
        "there, or something intercepts the connection); nothing was pinned for it. "
        "Compare `aws ec2 get-console-output --instance-id ID` and the node's address "
        "(`clusterkit status --wide`), then run `clusterkit up` again")
