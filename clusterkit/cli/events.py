"""Events (clusterkit.events) on a rich console: one line per event, indented by its
level and coloured by its kind; a stage started with a ``total`` (pack's lists) gets a
progress bar that its PROGRESS events move and its STAGE_DONE event closes."""

from __future__ import annotations

from types import TracebackType

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
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


class ConsoleReporter:
    """A Reporter that prints. Use it as a context manager where a bar may be open when
    the command fails, so the bar is closed (and the terminal restored) either way."""

    def __init__(self, console: Console, *, unit: str = "items") -> None:
        self.console = console
        self.unit = unit
        self._bar: Progress | None = None
        self._task: TaskID | None = None
        self._stage: Stage | None = None

    def __call__(self, event: Event) -> None:
        if event.kind is Kind.STAGE_STARTED and event.total is not None:
            self._open(event)
            return
        if self._bar is not None and event.stage is self._stage:
            if event.kind is Kind.PROGRESS:
                assert self._task is not None
                self._bar.update(self._task, completed=event.done or 0)
                return
            if event.kind is Kind.STAGE_DONE:
                self.close()
        self.line(event)

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
        self._stage = event.stage

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
        self._bar, self._task, self._stage = None, None, None

    def __enter__(self) -> ConsoleReporter:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
