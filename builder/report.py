"""The one object that owns the terminal: progress while ninja runs, then a summary table.

On a terminal a live rich progress bar; in CI or when piped, plain lines.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table


@dataclass(frozen=True)
class VariantResult:
    kernel: str
    variant: str
    status: str  # built | unchanged | failed | skipped | passed
    seconds: float = 0.0
    path: Path | None = None
    log: Path | None = None
    reason: str = ""
    toolchain: str = ""  # what built it: torch (python) + nvcc
    floor: str = ""  # the ABI floor its libraries need, e.g. "needs manylinux_2_34_x86_64 (glibc 2.34, ...)"
    details: tuple[str, ...] = ()  # a failure's compiler lines after the reason (source line, caret)

    @property
    def ok(self) -> bool:
        return self.status not in ("failed",)


class Reporter:
    def __init__(self, verbose: bool = False, plain: bool | None = None, stream=None):
        self.console = Console(file=stream or sys.stderr, highlight=False, soft_wrap=True)
        self.err = Console(file=sys.stderr, highlight=False, soft_wrap=True)
        self.out = Console(file=stream or sys.stdout, highlight=False, soft_wrap=True)
        self.verbose = verbose
        self.plain = (not self.console.is_terminal) if plain is None else plain
        self._progress: Progress | None = None
        self._task = None
        self._notes: list[str] = []
        self._variants: dict[str, int] = {}  # variant -> its steps in the graph
        self._variant_tasks: dict[str, object] = {}

    # -- messages -----------------------------------------------------------------------------

    def info(self, message: str) -> None:
        self.console.print(message, markup=False)

    def warn(self, message: str) -> None:
        self.err.print(f"kbuild: warning: {message}", markup=False)

    def error(self, message: str, hint: str | None = None) -> None:
        self.err.print(f"kbuild: error: {message}", markup=False)
        if hint:
            self.err.print(f"  hint: {hint}", markup=False)

    def result(self, text: str) -> None:
        """Machine-readable or primary output: stdout."""
        self.out.print(text, markup=False)

    def note(self, message: str) -> None:
        """A line printed under the next summary (e.g. the compile cache's hits and misses)."""
        self._notes.append(message)

    # -- compile progress ---------------------------------------------------------------------

    def start_variants(self, steps: dict[str, int]) -> None:
        """The variants the next compile run builds, with their step counts (for the live view)."""
        self._variants = dict(steps)

    def start_jobs(self, total: int, title: str) -> None:
        if self.plain:
            self.info(f"{title}: {total} step(s)")
            return
        self._progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                  TimeElapsedColumn(), console=self.console, transient=True)
        self._progress.start()
        self._task = self._progress.add_task(title, total=total)
        if len(self._variants) > 1:  # one row per variant under the overall bar
            self._variant_tasks = {name: self._progress.add_task(f"  {name}", total=steps)
                                   for name, steps in self._variants.items()}

    def job_done(self, done: int, total: int, description: str, variant: str | None = None) -> None:
        """Step `done` of `total` finished; `variant` is the one the graph shows it under."""
        if self.plain:
            self.info(f"[{done}/{total}] {description}")
        elif self._progress is not None:
            self._progress.update(self._task, completed=done, total=total, description=description[:60])
            if variant in self._variant_tasks:
                self._progress.advance(self._variant_tasks[variant])

    def compiler_output(self, line: str) -> None:
        if self.verbose:
            self.console.print(line, markup=False)

    def stop_jobs(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
        self._variant_tasks = {}

    # -- summary ------------------------------------------------------------------------------

    def summary(self, results: list[VariantResult], title: str = "kbuild") -> None:
        self._summary(results, title)
        for message in self._notes:
            self.info(message)
        self._notes.clear()

    def _summary(self, results: list[VariantResult], title: str) -> None:
        if self.plain:
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
                if r.floor:
                    self.info(f"          {r.floor}")
                if r.toolchain and self.verbose:
                    self.info(f"          with {r.toolchain}")
            return
        table = Table(title=title, show_lines=False)
        for col in ("kernel", "variant", "status", "time", "output / log"):
            table.add_column(col)
        style = {"failed": "red", "skipped": "yellow", "built": "green", "passed": "green"}
        for r in results:
            if r.status == "failed" and r.log and not r.path:
                out = escape(r.reason) + "".join(f"\n{escape(line)}" for line in r.details) + f"\nfull log {r.log}"
            else:
                out = str(r.path or r.log or "") + (f"\nlog {r.log}" if r.log and r.path else "")
                out += f"\n{escape(r.reason)}" if r.reason else ""
            out += f"\n{r.floor}" if r.floor else ""
            out += f"\n[dim]{r.toolchain}[/]" if r.toolchain else ""
            table.add_row(r.kernel, r.variant, f"[{style.get(r.status, '')}]{r.status}[/]", f"{r.seconds:.1f}s", out)
        self.console.print(table)
