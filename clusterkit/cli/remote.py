"""`clusterkit exec`, `clusterkit ssh`: option wiring only."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import Callable
from typing import Any

import click

from clusterkit.cli.context import check_target_argument, get_ctx, json_option
from clusterkit.cli.render import print_json
from clusterkit.cluster.runtime import Runtime
from clusterkit.errors import RemoteError

ACCEPT_HELP = ("Accept the host key this node presents (index, name such as worker-2, or "
               "full name such as c-worker-2): a changed one, or a new one its console "
               "shows no key to check against; only when you know it is the node's. "
               "Repeatable.")


def accept_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """``--accept-new-host-key NODE`` (repeatable), for up, exec and ssh."""
    return click.option("--accept-new-host-key", "accept_host_keys", multiple=True,
                        metavar="NODE", help=ACCEPT_HELP)(func)


def exec_ssh(argv: list[str]) -> None:
    """Replace this process with ``ssh`` (the terminal is the user's, signals too)."""
    if not shutil.which(argv[0]):
        raise RemoteError("no `ssh` command on this machine",
                          "install the OpenSSH client (package openssh-client)")
    sys.stdout.flush()
    os.execvp(argv[0], argv)


def _runtime() -> Runtime:
    """The AWS session of --region/--profile; progress and warnings (an accepted host
    key) on stderr, as the nodes' own output owns stdout."""
    ctx = get_ctx()
    return Runtime.make(region=ctx.region, profile=ctx.profile,
                        report=ctx.reporter(ctx.err_console))


def _login_options(func: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed((
        click.option("--user", "-l", help="Login user (default: the spec's ssh.user, "
                     "else ubuntu)."),
        click.option("--identity-file", "-i", type=click.Path(dir_okay=False),
                     help="Private key file (default: the spec's ssh.identity_file, "
                     "else your ssh-agent)."),
        click.option("--port", "-p", type=click.IntRange(1, 65535),
                     help="SSH port (default: the spec's ssh.port, else 22)."),
    )):
        func = option(func)
    return func


@click.command("exec")
@click.argument("name", callback=check_target_argument)
@click.argument("command", nargs=-1, required=True)
@click.option("--node", "-n", "nodes", multiple=True, metavar="NODE",
              help="Only this node: index (2), name (master, worker-2), role (worker), "
              "instance id or full name (c-worker-2). Repeatable. Default: every node.")
@click.option("--timeout", type=float, default=None,
              help="Give up on a node's command after this many seconds.")
@click.option("--connect-timeout", type=float, default=15.0, show_default=True,
              help="Seconds to wait for each SSH connection.")
@click.option("--forward-agent", "-A", is_flag=True,
              help="Forward your ssh-agent to the nodes, for a command that must SSH onward "
              "(e.g. git clone over SSH). While it runs, any process of the login user on a "
              "node can use your keys; `ssh-add -c` makes each use ask you first.")
@accept_option
@_login_options
@json_option
def exec_(name: str, command: tuple[str, ...], nodes: tuple[str, ...],
          accept_host_keys: tuple[str, ...], timeout: float | None, connect_timeout: float,
          forward_agent: bool, user: str | None, identity_file: str | None,
          port: int | None) -> None:
    """Run CMD on every node at once; output prefixed per node.

    \b
    Example:
      clusterkit exec sandbox --node worker -- nproc

    Workers are reached through the master. Your ssh-agent is not forwarded unless you
    pass -A. Exit 1 if the command fails on any node (--json: the error object's
    "results" holds every node's result). NAME is a cluster name (looked up in --region)
    or a spec file (its regions)."""
    from clusterkit.cluster.access.remote_ops import do_exec

    ctx = get_ctx()
    # A failure raises GroupError; under --json its error object carries every node's
    # result ("results"), so stdout stays one JSON document.
    results = do_exec(name, command, nodes=nodes, accept_host_keys=accept_host_keys,
                      region=ctx.region, profile=ctx.profile,
                      user=user, port=port, identity_file=identity_file, timeout=timeout,
                      connect_timeout=connect_timeout, forward_agent=forward_agent,
                      out=sys.stderr if ctx.json else sys.stdout, rt=_runtime())
    if ctx.json:
        print_json(results.as_dict())
    else:
        ctx.err_console.print(f"[green]ok[/green] on {len(results)} node(s)")


class _SplitAtDashDash(click.Command):
    """Everything after ``--`` is the remote command (so ``ssh NAME -- CMD`` is not read
    as NODE = CMD)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if "--" in args:
            cut = args.index("--")
            ctx.meta["remote_command"] = tuple(args[cut + 1:])
            args = args[:cut]
        return super().parse_args(ctx, args)


@click.command(cls=_SplitAtDashDash)
@click.argument("name", callback=check_target_argument)
@click.argument("node", required=False)
@click.option("--print", "print_only", is_flag=True,
              help="Print the ssh command instead of running it.")
@accept_option
@_login_options
def ssh(name: str, node: str | None, print_only: bool, accept_host_keys: tuple[str, ...],
        user: str | None, identity_file: str | None, port: int | None) -> None:
    """Shell on a node (default: the master) with the system ssh, agent forwarded (-A).

    \b
    Example:
      clusterkit ssh sandbox worker-2
      clusterkit ssh sandbox --print --json

    NODE: index (2), name (master, worker-2), instance id or full name. Workers are reached through the master
    (-J); host keys are checked against the ones `up` recorded. Your agent is forwarded so
    that from the node you reach the others by name; `ssh-add -c` makes each use of a key
    ask you first. NAME is a cluster name (looked up in --region) or a spec file (its
    regions)."""
    from clusterkit.cluster.access.remote_ops import do_ssh

    ctx = get_ctx()
    command = click.get_current_context().meta.get("remote_command", ())
    argv = do_ssh(name, node, command, accept_host_keys=accept_host_keys, region=ctx.region,
                  profile=ctx.profile, user=user, port=port, identity_file=identity_file,
                  rt=_runtime())
    if not print_only:
        exec_ssh(argv)
    if ctx.json:  # only reached with --print: without it this process became ssh
        print_json({"argv": argv, "command": shlex.join(argv)})
    else:
        click.echo(shlex.join(argv))


COMMANDS = [exec_, ssh]
