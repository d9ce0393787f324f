"""Events (clusterkit.events) on a rich console: one line per event, indented by its
level and coloured by its kind; a stage started with a ``total`` (pack's lists, the
snapshot upload) gets a progress bar that its PROGRESS events move and its STAGE_DONE
event closes.

On a terminal every other stage is a wait with a live line under its output: a spinner,
the time it has taken so far and, once the stage reports counts (nodes ready, volumes
attached), a bar with k/N. It disappears when the stage is done, or when the command
fails or is interrupted (an error event of no stage: what follows is plain lines),
leaving the lines; the stage's periodic "k/N ready" lines are left out there, as the bar
says the same. Piped or captured output (CI, logs, tests) is the plain lines only, every
one of them; a counted stage is its start and done lines there, never a bar or a line
per step."""

from __future__ import annotations

from types import TracebackType

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from clusterkit.events import Event, Kind, Stage

STYLES = {Kind.WARNING: "yellow", Kind.ERROR: "red", Kind.STAGE_DONE: "green"}


class RateColumn(ProgressColumn):
    """Items/s over the whole run so far (steadier than rich's sliding speed)."""

    def __init__(self, unit: str) -> None:
        super().__init__()
        self.unit = unit

    def render(self, task: Task) -> Text:
        elapsed = task.elapsed or 0.0
        rate = task.completed / elapsed if elapsed > 0 else 0.0
        return Text(f"{rate:,.0f} {self.unit}/s", style="progress.data.speed")


class CountColumn(ProgressColumn):
    """``k/N`` once the task has a total, nothing before."""

    def render(self, task: Task) -> Text:
        if task.total is None:
            return Text("")
        return Text(f"{task.completed:,.0f}/{task.total:,.0f}", style="progress.download")


class ConsoleReporter:
    """A Reporter that prints. Use it as a context manager (or ``close`` it) where a bar
    may be open when the command fails, so the terminal is restored either way.
    ``live``: spinners and bars for waits (default: when the console is a terminal)."""

    def __init__(self, console: Console, *, unit: str = "items",
                 live: bool | None = None) -> None:
        self.console = console
        self.unit = unit
        self.live = console.is_terminal if live is None else live
        self._bar: Progress | None = None
        self._task: TaskID | None = None
        self._stage: Stage | None = None
        self._waiting = False  # the open bar is a wait's (transient), not a counted stage's
        self._quiet: Stage | None = None  # a counted stage with no bar (not a terminal)

    def __call__(self, event: Event) -> None:
        if event.kind is Kind.ERROR and event.stage is None:
            self.close()  # the command failed or was interrupted: no wait goes on
        if event.kind is Kind.STAGE_STARTED:
            self.close()
            if event.total is not None and self.live:
                self._open(event)
                return
            self._quiet = event.stage if event.total is not None else None
            self.line(event)
            if self.live and event.stage is not None:
                self._open_wait(event.stage)
            return
        if self._bar is not None and event.stage is self._stage:
            if event.kind is Kind.PROGRESS and self._moved(event):
                return
            if event.kind is Kind.STAGE_DONE:
                self.close()
        elif self._quiet is not None and event.stage is self._quiet:
            if event.kind is Kind.PROGRESS and event.done is not None:
                return
            if event.kind is Kind.STAGE_DONE:
                self._quiet = None
        self.line(event)

    def _moved(self, event: Event) -> bool:
        """Move the open bar by ``event``; True when the event needs no line of its own
        (a counted stage's step, or a wait's periodic k/N line)."""
        assert self._bar is not None and self._task is not None
        if not self._waiting:
            self._bar.update(self._task, completed=event.done or 0)
            return True
        if event.total is not None:
            self._bar.update(self._task, completed=event.done or 0, total=event.total)
        return event.node is None and event.total is not None

    def line(self, event: Event) -> None:
        self.console.print("  " * event.level + event.text, style=STYLES.get(event.kind),
                           markup=False, highlight=False, soft_wrap=True)

    def _open(self, event: Event) -> None:
        self.close()
        self._bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                             MofNCompleteColumn(), RateColumn(self.unit), TimeElapsedColumn(),
                             TimeRemainingColumn(), console=self.console, transient=False)
        self._bar.start()
        self._task = self._bar.add_task(event.text, total=event.total)
        self._stage, self._waiting = event.stage, False

    def _open_wait(self, stage: Stage) -> None:
        self._bar = Progress(SpinnerColumn(), TextColumn("{task.description}"),
                             BarColumn(), CountColumn(), TimeElapsedColumn(),
                             console=self.console, transient=True)
        self._bar.start()
        self._task = self._bar.add_task(stage.value, total=None)
        self._stage, self._waiting = stage, True

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
        self._bar, self._task, self._stage, self._waiting = None, None, None, False
        self._quiet = None

    def __enter__(self) -> ConsoleReporter:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
