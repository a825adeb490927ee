"""`synestra ingest --follow`: the poll loop's rendering (library: synestra_cli.ingest.follow)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from synestra_cli.api.shared import plural
from synestra_cli.cli.render import dumps

if TYPE_CHECKING:
    from synestra_cli.api.loading import Follower


def run_follow(
    follower: Follower,
    paths: list[Path],
    interval: float,
    max_polls: int | None,
    reporter: Any,
    as_json: bool,
) -> bool:
    """Poll until max_polls or a signal (the caller holds cli.common.stop_on_signals: SIGTERM is raised
    as Terminated where Ctrl-C would be, the file being loaded rolls back, exit 143). True when a file's
    last outcome is a failure: one that failed while logrotate moved it and loaded at a later poll did not."""
    reporter.say(f"following {plural(len(paths), 'path')} every {interval:g} s into {follower.db} (Ctrl-C stops)")
    for path in paths:
        if not path.exists():
            reporter.say(f"warning: {path} does not exist (yet): it is read once it appears")
    last_failed: dict[str, bool] = {}

    def on_moved(moved: list[tuple[str, str]]) -> None:
        for old, new in moved:
            reporter.say(f"rotated: {old} -> {new} (its rows are not loaded again)")

    polls = follower.run(interval, max_polls, on_file=reporter.on_file, on_report=reporter.on_report, on_moved=on_moved)
    for poll in polls:
        if poll.deferred:
            reporter.say(f"waiting for the line being written: {', '.join(poll.deferred)}")
        if poll.busy:
            reporter.say(f"warning: {poll.busy}; retried at the next poll")
        loaded = [r for r in poll.reports if r.status == "loaded"]
        failed = [r for r in poll.reports if r.status == "failed"]
        last_failed |= {r.path: r.status == "failed" for r in poll.reports}
        if loaded or failed:
            reporter.say(
                f"poll {poll.poll}: {len(loaded)} loaded, {len(failed)} failed; {sum(r.rows for r in loaded)} rows"
            )
        if as_json and (poll.reports or poll.moved):
            doc = {"schema": "synestra.ingest/1", "poll": poll.poll, "moved": poll.moved}
            click.echo(dumps({**doc, "files": [r.__dict__ for r in poll.reports]}))
    return any(last_failed.values())
