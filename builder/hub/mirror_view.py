"""What `kbuild hub mirror` shows while it works and when it is done: on a terminal a live row per
repo (files and bytes fetched of what was missing, speed), in CI or piped plain lines (a line per
repo when it starts and ends, one per variant verified). Through the command's Reporter, so text
reaches rich only as literals (builder/report.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TransferSpeedColumn,
)

from builder.report import Reporter, human_size, literal
from kbuild_hub.upstream.mirror import Item, Tally, Target


@dataclass
class Totals:
    repos: set = field(default_factory=set)
    commits: set = field(default_factory=set)
    files_fetched: int = 0
    files_cached: int = 0
    bytes_fetched: int = 0
    bytes_cached: int = 0
    verified: int = 0
    verified_now: int = 0
    no_digest: int = 0
    failures: int = 0

    def add(self, target: Target, tally: Tally, verified_before: int) -> None:
        self.repos.add((target.snap.repo_type, target.snap.repo_id))
        self.commits.add(target.snap.commit)
        self.files_fetched += tally.files_fetched
        self.files_cached += tally.files_cached
        self.bytes_fetched += tally.bytes_fetched
        self.bytes_cached += tally.bytes_cached
        self.verified += len(tally.verified)
        self.verified_now += len(tally.verified) - verified_before
        self.no_digest += sum(how.startswith("no digest") for how in tally.verified.values())


class MirrorView:
    def __init__(self, reporter: Reporter):
        self.reporter = reporter
        self._live: Progress | None = None
        self._task: TaskID | None = None

    def __enter__(self) -> MirrorView:
        if not self.reporter.plain:
            self._live = Progress(TextColumn("{task.description}", markup=False), BarColumn(bar_width=20),
                                  DownloadColumn(), TransferSpeedColumn(), TextColumn("{task.fields[files]}"),
                                  TimeElapsedColumn(), console=self.reporter.console, transient=False,
                                  redirect_stdout=False, redirect_stderr=False)
            self._live.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    def line(self, text: str) -> None:
        """A line above the live rows (or in the plain stream)."""
        if self._live is not None:
            self._live.console.print(literal(text))
        else:
            self.reporter.info(text)

    def start(self, target: Target, missing: list[Item], cached: list[Item]) -> None:
        where = f"{target.label} ({target.snap.commit[:12]})"
        size = sum(i.size for i in missing)
        files = sum(i.files for i in missing)
        have = sum(i.files for i in cached)
        if not missing:
            self.line(f"{where}: already mirrored ({have} file(s), {human_size(sum(i.size for i in cached))}); "
                      "nothing to fetch")
            return
        if self._live is not None:
            self._task = self._live.add_task(where, total=size, files=f"0/{files} files")
            self._files_total, self._files_done, self._bytes_total = files, 0, size
        else:
            self.line(f"{where}: fetching {files} file(s), {human_size(size)}"
                      + (f" ({have} already here)" if have else ""))

    def advance(self, n: int) -> None:
        if self._live is not None and self._task is not None:
            self._live.advance(self._task, n)

    def item_done(self, target: Target, item: Item, how: str | None) -> None:
        if self._live is not None and self._task is not None:
            self._files_done += item.files
            self._live.update(self._task, files=f"{self._files_done}/{self._files_total} files")
        if how is not None:
            self.line(f"  {target.label} {item.path}: verified, {how}")

    def done(self, target: Target, tally: Tally) -> None:
        if self._task is not None and self._live is not None:
            self._live.update(self._task, completed=self._bytes_total)
            self._task = None
        if tally.files_fetched:
            self.line(f"{target.label}: {tally.files_fetched} file(s) fetched, {human_size(tally.bytes_fetched)}"
                      + (f"; {len(tally.failures)} failed" if tally.failures else ""))

    def summary(self, root, totals: Totals) -> None:
        verified = f"{totals.verified} variant(s) verified"
        if totals.verified_now != totals.verified:
            verified += f" ({totals.verified_now} this run)"
        if totals.no_digest:
            verified += f", {totals.no_digest} without a digest in metadata.json"
        self.reporter.result(
            f"mirrored {len(totals.repos)} repo(s) at {len(totals.commits)} commit(s) into {root}: "
            f"{totals.files_fetched} file(s) fetched ({human_size(totals.bytes_fetched)}), "
            f"{totals.files_cached} already there ({human_size(totals.bytes_cached)}); {verified}"
            + (f"; {totals.failures} failure(s)" if totals.failures else ""))
