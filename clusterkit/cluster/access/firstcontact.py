"""Nothing trusted on first use: before a node's first host key is pinned, compare it
with the keys the instance printed on its console (cloud-init's keys-to-console block,
read with GetConsoleOutput over the AWS API, not over the address SSH dialled). A key the
console does not show is refused. Where the console shows no keys (the image prints
none, AWS has posted nothing within ``CONSOLE_WAIT``, or GetConsoleOutput failed) there
is nothing to check the key against: it is not pinned either, unless the user accepts
that node's key (``--accept-new-host-key NODE``), which pins it with a warning."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from clusterkit.cluster.access import console_keys
from clusterkit.cluster.access.console_keys import ConsoleKeys, Fingerprint, Verdict
from clusterkit.cluster.runtime import Runtime
from clusterkit.errors import AwsError, RemoteError
from clusterkit.events import Stage
from clusterkit.plan.nodes import Node
from clusterkit.remote.known_hosts import ACCEPT_FLAG

# cloud-init prints the keys in its final stage, seconds after sshd answers (clusterkit
# sends no user-data that would run before it); AWS posts a non-Nitro console within
# minutes. Past this, a first key with nothing to compare with is refused (unless
# accepted).
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


@dataclass(frozen=True)
class Unconfirmed:
    """A new node whose console shows no key to compare its key with (``why``)."""

    label: str
    instance_id: str
    presented: str
    why: str

    def describe(self) -> str:
        return (f"{self.label} ({self.instance_id}): {self.why}; it presents "
                f"{console_keys.sha256_fingerprint(self.presented)} "
                f"({console_keys.key_kind(self.presented)})")


Refusal = ConsoleMismatch | Unconfirmed


def _judge(rt: Runtime, label: str, iid: str, key: str, console: Console, wait: float,
           accepted: Collection[str]) -> Refusal | None:
    """One new key against its console: None to pin it (shown there, or accepted with a
    warning), else why it is refused."""
    verdict = console_keys.verify(key, console.keys)
    if verdict is Verdict.MATCH:
        return None
    if verdict is Verdict.MISMATCH:
        return ConsoleMismatch(label, iid, key, console_keys.expected(key, console.keys))
    why = _why_unprinted(console, wait)
    if iid not in accepted:
        return Unconfirmed(label, iid, key, why)
    rt.warn(f"{label} ({iid}): {why}: pinning its host key "
            f"{console_keys.sha256_fingerprint(key)} unchecked, as {ACCEPT_FLAG} asks",
            stage=Stage.SSH)
    return None


def verify(rt: Runtime, nodes: Sequence[Node], first: Mapping[str, str],
           labels: Mapping[str, str], reader: ConsoleReader | None = None,
           wait: float = CONSOLE_WAIT, accepted: Collection[str] = ()) -> list[Refusal]:
    """Check the keys of ``first`` ({instance id: key}, nodes never pinned) against their
    consoles (``reader``, default: AWS): the nodes refused, a console showing other keys
    or none. ``accepted`` (instance ids): a console showing none pins the key anyway,
    with a warning; another key on the console is refused all the same."""
    fresh = [n for n in nodes if n.instance_id in first]
    if not fresh:
        return []
    consoles = read_consoles(rt, fresh, reader or aws_console(rt), wait)
    refused: list[Refusal] = []
    for node in fresh:
        iid = node.instance_id
        refusal = _judge(rt, labels.get(iid, iid), iid, first[iid], consoles[iid], wait,
                         accepted)
        refused += [refusal] if refusal is not None else []
    matched = sum(consoles[n.instance_id].keys.printed for n in fresh) \
        - sum(isinstance(r, ConsoleMismatch) for r in refused)  # printed, and this key
    if matched:
        rt.info(f"{matched} new host key(s) match what their instance printed on its "
                "console", level=1, stage=Stage.SSH)
    return refused


def refusal_error(refused: Sequence[Refusal]) -> RemoteError:
    """The error for the refused first keys: another key on a console first (someone
    may be in between), else the keys nothing confirms."""
    lied = [r for r in refused if isinstance(r, ConsoleMismatch)]
    if lied:
        return mismatch_error(lied)
    return unconfirmed_error([r for r in refused if isinstance(r, Unconfirmed)])


def unconfirmed_error(found: Sequence[Unconfirmed]) -> RemoteError:
    """Refusal for new keys with nothing on the console to check them against, naming
    each node, its instance id, why, and the option that pins the key anyway."""
    accept = " ".join(f"{ACCEPT_FLAG} {u.label}" for u in found)
    return RemoteError(
        "no host key on the console to check a new node's key against, not pinning it: "
        + "; ".join(u.describe() for u in found)
        + f". To pin the key it presents anyway, repeat the command with `{accept}`",
        "clusterkit trusts no host key on first use: nothing was pinned for that node and "
        "nothing connects to it. Accept it only once you have compared its fingerprint "
        "with the instance's system log (`aws ec2 get-console-output --instance-id ID`, "
        "or the EC2 console: Actions > Monitor > Get system log) or on the node itself; "
        f"`{ACCEPT_FLAG} NODE` is taken by `clusterkit up`, `exec` and `ssh`")


def mismatch_error(refused: Sequence[ConsoleMismatch]) -> RemoteError:
    return RemoteError(
        "host key does not match the one the instance printed on its console, refusing "
        "it: " + "; ".join(m.describe() for m in refused),
        "the address SSH dialled may not reach that instance (another machine answers "
        "there, or something intercepts the connection); nothing was pinned for it. "
        "Compare `aws ec2 get-console-output --instance-id ID` and the node's address "
        "(`clusterkit status --wide`), then run `clusterkit up` again")
