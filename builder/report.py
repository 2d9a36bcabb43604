"""The one object that owns the terminal: live progress (planning, provisioning, the compile with
its variants and its slowest running step, a test suite), then a summary.

On a terminal a live rich view; in CI or when piped, plain lines. What kbuild shows comes from
paths, build.toml, compilers and pytest: it reaches rich only through `literal`, never as markup
or emoji codes, so `[/]` or `:x:` in a path or a status is shown as it is.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, ProgressColumn, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Column, Table
from rich.text import Text

STILL_RUNNING_S = 60  # plain output: a step running this long gets a line, at most one such line this often
_STYLE = {"failed": "red", "skipped": "yellow", "built": "green", "passed": "green", "unchanged": "green",
          "could not collect": "red", "left out": "yellow", "no tests": "yellow"}


def literal(text: object, style: str = "", fold: bool = False) -> Text:
    """The one way text reaches rich: exactly as it is, however many brackets or colons it has.
    `fold`: wrapped onto more lines where the output would cut it (a live view's rows)."""
    if fold:
        return Text(str(text), style=style, overflow="fold", no_wrap=False)
    return Text(str(text), style=style)


def _console(file=None, stderr: bool = False) -> Console:
    # markup and emoji codes off for every print, so a str is shown as it is too; soft_wrap: a
    # line is never cut or broken by rich (the terminal wraps it, and copying gives it whole)
    return Console(file=file, stderr=stderr, markup=False, emoji=False, highlight=False, soft_wrap=True)


@dataclass(frozen=True)
class VariantResult:
    kernel: str
    variant: str
    status: str  # built | unchanged | failed | skipped | passed; kbuild test's: could not collect | left out | no tests
    seconds: float = 0.0
    path: Path | None = None
    log: Path | None = None
    reason: str = ""
    toolchain: str = ""  # what built it: torch (python) + nvcc
    # the ABI floor its libraries need, e.g. "needs manylinux_2_34_x86_64 (glibc 2.32, ...: the lowest …)"
    floor: str = ""
    details: tuple[str, ...] = ()  # lines after the reason: a failure's compiler lines, pytest's skip reasons

    @property
    def ok(self) -> bool:
        return self.status not in ("failed", "could not collect")


class Reporter:
    def __init__(self, verbose: bool = False, plain: bool | None = None, stream=None):
        # Without a stream the consoles look up sys.stderr/sys.stdout when they write.
        self.console = _console(stream, stderr=stream is None)
        self.err = self.console if stream is None else _console(sys.stderr)
        self.out = _console(stream)
        self.verbose = verbose
        self.plain = (not self.console.is_terminal) if plain is None else plain
        self._view: _View | None = None
        self._depth = 0  # open phases
        self._task: TaskID | None = None
        self._title = ""
        self._counted = False  # plain: the step count was printed
        self._last_still_running = 0.0
        self._notes: list[str] = []
        self._variants: dict[str, int] = {}  # variant -> its steps in the graph
        self._variant_tasks: dict[str, TaskID] = {}

    # -- messages -----------------------------------------------------------------------------

    def info(self, message: str) -> None:
        self.console.print(literal(message))

    def warn(self, message: str) -> None:
        self.err.print(literal(f"kbuild: warning: {message}"))

    def error(self, message: str, hint: str | None = None) -> None:
        self.err.print(literal(f"kbuild: error: {message}"))
        if hint:
            self.err.print(literal(f"  hint: {hint}"))

    def failure(self, e: Exception, prefix: str = "") -> None:
        """A KbuildError as the CLI shows it: each error it holds (a build.toml's every error) on
        its own line, the hint after the last."""
        errors = getattr(e, "errors", (e,))
        for n, error in enumerate(errors, start=1):
            self.error(f"{prefix}{error}", getattr(e, "hint", None) if n == len(errors) else None)

    def result(self, text: str) -> None:
        """Machine-readable or primary output: stdout."""
        # stdout on the same terminal as a live view: above the view, where the terminal shows it anyway
        out = self.console if self._view is not None and self.out.is_terminal else self.out
        out.print(literal(text))

    def note(self, message: str) -> None:
        """A line printed under the next summary (e.g. the compile cache's hits and misses)."""
        self._notes.append(message)

    # -- live progress ------------------------------------------------------------------------

    @contextmanager
    def phase(self, label: str) -> Iterator[None]:
        """Show `label` with its elapsed time while the block runs (planning, provisioning a
        toolchain, a test suite); phases nest. Plain output shows nothing: the block's own lines tell."""
        if self.plain:
            yield
            return
        view = self._open()
        task = view.add_task("  " * self._depth + _relative(label), total=None, phase=True)
        self._depth += 1
        view.refresh()  # shown even when the block is over before the next refresh
        try:
            yield
        finally:
            self._depth -= 1
            view.remove_task(task)
            self._close_if_idle()

    def start_variants(self, steps: dict[str, int]) -> None:
        """The variants the next compile run builds, with their step counts (for the live view)."""
        self._variants = dict(steps)

    def start_jobs(self, title: str, total: int | None = None) -> None:
        """A compile run starts; `total` steps when known (ninja says so with its first finished step)."""
        self._title, self._counted = title, False
        if self.plain:
            return
        view = self._open()
        self._task = view.add_task(title, total=total)
        if len(self._variants) > 1:  # one row per variant under the overall bar
            self._variant_tasks = {name: view.add_task(f"  {name}", total=steps, variant=True)
                                   for name, steps in self._variants.items()}
        view.refresh()

    def job_done(self, done: int, total: int, description: str, variant: str | None = None) -> None:
        """Step `done` of `total` finished; `variant` is the one the graph shows it under."""
        if self.plain:
            if not self._counted:
                self.info(f"{self._title}: {total} step(s)")
                self._counted = True
            self.info(f"[{done}/{total}] {description}")
        elif self._view is not None and self._task is not None:
            self._view.update(self._task, completed=done, total=total)
            if variant in self._variant_tasks:
                self._view.advance(self._variant_tasks[variant])

    def running(self, steps: list[tuple[str, float]]) -> None:
        """The steps running now: (status line, time.monotonic() when it started). The live view
        shows the longest-running one; plain output gets a line when one runs for minutes."""
        if not self.plain:
            if self._view is not None:
                self._view.running = tuple(steps)
            return
        now = time.monotonic()
        if steps and now - self._last_still_running >= STILL_RUNNING_S:
            line, started = min(steps, key=lambda s: s[1])
            if now - started >= STILL_RUNNING_S:
                more = f" (and {len(steps) - 1} more)" if len(steps) > 1 else ""
                self.info(f"still running after {_duration(now - started)}: {line}{more}")
                self._last_still_running = now

    def compiler_output(self, line: str) -> None:
        if self.verbose:
            self.console.print(literal(line))

    def stop_jobs(self) -> None:
        if self._view is not None:
            self._view.running = ()
            for task in [self._task, *self._variant_tasks.values()]:
                if task is not None:
                    self._view.remove_task(task)
            self._close_if_idle()
        self._task = None
        self._variant_tasks = {}

    def _open(self) -> _View:
        if self._view is None:
            self._view = _View(self.console)
            self._view.start()
        return self._view

    def _close_if_idle(self) -> None:
        if self._view is not None and not self._view.tasks:
            self._view.stop()
            self._view = None

    # -- summary ------------------------------------------------------------------------------

    def summary(self, results: list[VariantResult], title: str = "kbuild") -> None:
        if self.plain:
            self._plain_summary(results)
        else:
            self._terminal_summary(results, title)
        for message in self._notes:
            self.info(message)
        self._notes.clear()

    def table(self, title: str, headers: list[str], rows: list[list[str]], right: tuple[int, ...] = ()) -> None:
        """Rows of text under headers, on stdout: a rich table on a terminal, aligned plain columns
        otherwise (a log keeps every cell whole). `right`: the columns to right-align (figures)."""
        if not self.plain:
            table = Table(title=literal(title, "italic"))
            for n, h in enumerate(headers):
                table.add_column(literal(h), justify="right" if n in right else "left", overflow="fold")
            for row in rows:
                table.add_row(*(literal(cell) for cell in row))
            self.out.print(table, soft_wrap=False)
            return
        widths = [max(len(h), *(len(r[n]) for r in rows)) if rows else len(h) for n, h in enumerate(headers)]
        def line(cells):
            padded = (c.rjust(w) if n in right else c.ljust(w)
                      for n, (c, w) in enumerate(zip(cells, widths, strict=False)))
            return "  ".join(padded).rstrip()
        self.out.print(literal(title))
        for cells in (headers, *rows):
            self.out.print(literal(line(cells)))

    def _plain_summary(self, results: list[VariantResult]) -> None:
        for r in results:
            if r.status == "failed" and r.log and not r.path:
                # the compiler's words first, with clickable paths; the whole log after them
                self.info(f"{r.status:9} {r.kernel}/{r.variant} {r.seconds:.1f}s — {r.reason}")
                for line in r.details:
                    self.info(f"          {line}")
                self.info(f"          full log: {r.log}")
                continue
            where = r.path or r.log or ""
            log = f" (log {r.log})" if r.log and r.path else ""
            extra = f" — {r.reason}" if r.reason else ""
            self.info(f"{r.status:9} {r.kernel}/{r.variant} {r.seconds:.1f}s {where}{log}{extra}")
            for line in r.details:
                self.info(f"          {line}")
            if r.floor:
                self.info(f"          {r.floor}")
            if r.toolchain and self.verbose:
                self.info(f"          with {r.toolchain}")

    def _terminal_summary(self, results: list[VariantResult], title: str) -> None:
        """A table of what happened to each variant, then each one's paths and reasons as whole
        lines: a table cell would cut or break them, and they are there to be copied."""
        table = Table(title=literal(title, "italic"))
        # names fold onto more lines when the terminal is narrow, never end in "…"
        # the variant's width first, after a short kernel name's: one line each wherever they fit
        variant = max((len(r.variant) for r in results), default=0)
        kernel = max((len(r.kernel) for r in results), default=0)
        table.add_column("kernel", overflow="fold", max_width=max(min(kernel, 16), self.console.width - variant - 26))
        table.add_column("variant", overflow="fold")
        table.add_column("status", no_wrap=True)
        table.add_column("time", justify="right", no_wrap=True)
        for r in results:
            table.add_row(literal(r.kernel), literal(r.variant), literal(r.status, _STYLE.get(r.status, "")),
                          literal(f"{r.seconds:.1f}s"))
        self.console.print(table, soft_wrap=False)
        for r in results:
            self.console.print(literal(f"{r.kernel}/{r.variant}", "bold"))
            for text, style in _detail_lines(r):
                self.console.print(literal(f"  {text}", style))


def _detail_lines(r: VariantResult) -> list[tuple[str, str]]:
    """What the terminal summary shows under a variant: (line, style)."""
    if r.status == "failed" and r.log and not r.path:
        return [(r.reason, "red"), *((line, "") for line in r.details), (f"full log {r.log}", "")]
    lines = [(str(r.path), "")] if r.path else []
    lines += [(f"log {r.log}", "")] if r.log else []
    lines += [(r.reason, _STYLE.get(r.status, "") if r.status != "passed" else "")] if r.reason else []
    lines += [(line, "") for line in r.details]
    lines += [(r.floor, "")] if r.floor else []
    lines += [(r.toolchain, "dim")] if r.toolchain else []
    return lines


class _View(Progress):
    """The live rows: phases (spinner, label, time) and the compile (bar, steps, time, a row per
    variant), then the longest-running step with how long it has been running."""

    def __init__(self, console: Console):
        self.running: tuple[tuple[str, float], ...] = ()  # set by the watcher thread, read by rich's
        super().__init__(_Spinner(finished_text=" "),
                         TextColumn("{task.description}", markup=False, table_column=Column(overflow="fold")),
                         _Bar(bar_width=20), _Count(), TimeElapsedColumn(), console=console, transient=True,
                         redirect_stdout=False, redirect_stderr=False)

    def get_renderables(self):
        yield self.make_tasks_table(self.tasks)
        steps = self.running
        if steps:
            line, started = min(steps, key=lambda s: s[1])
            more = f" (and {len(steps) - 1} more)" if len(steps) > 1 else ""
            yield literal(f"  running {_duration(time.monotonic() - started)}: {_relative(line)}{more}", "cyan",
                          fold=True)


class _Spinner(SpinnerColumn):
    def render(self, task):
        return Text("") if task.fields.get("variant") else super().render(task)


class _Bar(BarColumn):
    def render(self, task):
        return Text("") if task.fields.get("phase") else super().render(task)


class _Count(ProgressColumn):
    def render(self, task):
        if task.fields.get("phase"):
            return Text("")
        total = "?" if task.total is None else str(int(task.total))
        return literal(f"{int(task.completed)}/{total}", "progress.download")


def _relative(line: str) -> str:
    """A status line's absolute paths below the current folder made relative to it: short, and
    still what a terminal or editor opens from here."""
    here = Path.cwd()
    words = []
    for word in line.split(" "):
        if word.startswith("/") and Path(word).is_relative_to(here) and Path(word) != here:
            word = str(Path(word).relative_to(here))
        words.append(word)
    return " ".join(words)


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def human_size(n: float) -> str:
    """A byte count as kbuild's listings show it: 12 kB, 3 MB, 1.2 GB (powers of 1000)."""
    for unit in ("B", "kB", "MB"):
        if n < 1000:
            return f"{n:.0f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"
