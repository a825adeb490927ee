"""`synestra ingest PATH...`: load exports into the store."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from synestra_cli.api.shared import ExitCode, plural, relative_in
from synestra_cli.cli.common import engine_option, format_name_callback, handle_errors, stop_on_signals
from synestra_cli.cli.options import MAX_POLLS, POLL_INTERVAL, YEAR, db_option, refuse_together
from synestra_cli.cli.render import dumps, printable, render_rows, show_time

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

    from synestra_cli.api.loading import FileReport

REJECTS_SHOWN = 3
CSV_COLUMNS = ["path", "status", "format", "rows", "rejected", "first_ts", "last_ts", "hosts", "source_id", "error"]
OUTPUT_FORMATS = ("table", "json", "csv")


def _output_format(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """--format is the output format, as in every command. An input format name there is what
    `--format NAME` meant before 0.3 (now --input-format NAME): still read so, with a warning."""
    if value is None or value in OUTPUT_FORMATS:
        return value
    name = format_name_callback(ctx, param, value)
    click.echo(f"warning: ingest --format {value} is now --input-format {value}", err=True)
    ctx.meta["legacy_input_format"] = name
    return None


class Reporter:
    """Per-file lines on stderr as each file finishes; on a terminal, under a progress bar that rich
    redraws below them (writing around rich's live display would tear the bar)."""

    def __init__(self, tty: bool) -> None:
        self.progress: Progress | None = None
        self.task: TaskID | None = None
        if tty:
            from rich.console import Console
            from rich.progress import Progress

            self.progress = Progress(transient=True, console=Console(stderr=True, highlight=False))

    def say(self, text: str) -> None:
        text = printable(text)  # file names and rejected lines may hold escape sequences
        if self.progress is not None:
            self.progress.console.print(text, markup=False, soft_wrap=True)
        else:
            click.echo(text, err=True)

    def on_file(self, path: Path, i: int, n: int) -> None:
        if self.progress is None:
            return
        if self.task is None:
            self.progress.start()
            self.task = self.progress.add_task("ingest", total=n)
        self.progress.update(self.task, completed=i, description=printable(path.name[:40]))
        if i >= n:
            self.progress.stop()

    def on_report(self, r: FileReport) -> None:
        if r.status == "failed":
            self.say(f"error: {r.error}")
            return
        if r.status == "empty":
            self.say(f"warning: {r.error}")
            return
        if r.status == "skipped":
            self.say(f"{r.path}: skipped, {r.error}")
            return
        span = f"{show_time(r.first_ts)} .. {show_time(r.last_ts)}" if r.first_ts and r.last_ts else "no timestamps"
        self.say(f"{r.path}: {r.format}, {plural(r.rows, 'row')}, {r.rejected} rejected, {span}")
        for line, reason, text in r.reject_samples[:REJECTS_SHOWN]:
            where = f"{r.path}:{line}" if line is not None else r.path  # a row whose line is not kept
            self.say(f"  reject {where}: {reason}: {text[:80]!r}")
        for note in r.notes:  # a note may name another source as the store holds it: absolute
            self.say(f"  note: {relative_in(note)}")


@click.command("ingest")
# readable=False: an unreadable file is that file's failure (reported, exit 3), not a usage error that
# would stop the good files beside it from loading.
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path, readable=False))
@db_option
@click.option(
    "--input-format",
    "input_format",
    metavar="NAME",
    callback=format_name_callback,
    help="Force this input format (see `synestra formats`).",
)
@click.option("--timezone", default="UTC", show_default=True, help="Zone of timestamps that carry none.")
@click.option("--year", type=YEAR, help="Year of syslog lines without one (default: from the file's mtime).")
@click.option("--host", help="Host of files that do not name one (e.g. plain dmesg).")
@click.option("--job", "job_id", help="Job id of job logs that do not name one.")
@click.option(
    "--cluster",
    metavar="NAME",
    help="Cluster of these files: job ids become NAME:ID (sacct's Cluster column wins), hosts NAME:HOST.",
)
@click.option("--strict", is_flag=True, help="Fail a file on any rejected line.")
@click.option(
    "--format",
    "fmt",
    metavar="[table|json|csv]",
    callback=_output_format,
    help="The per-file report: table (lines on stderr, the default), or json or csv on stdout.",
)
@click.option("--json", "as_json", is_flag=True, hidden=True, help="Same as --format json.")
@click.option(
    "--explain",
    "explain_after",
    is_flag=True,
    help="Then explain every job and keep the explanations, so that tax-report answers at once.",
)
@click.option(
    "--follow",
    is_flag=True,
    help="Keep polling: load new files, the new lines of grown ones, and recognise rotated ones (Ctrl-C stops).",
)
@click.option(
    "--interval",
    type=POLL_INTERVAL,
    default=5.0,
    show_default=True,
    metavar="SECONDS",
    help="With --follow: seconds between polls (the store is closed between them, so readers get in).",
)
@click.option("--max-polls", type=MAX_POLLS, metavar="N", help="With --follow: stop after N polls.")
@engine_option
@handle_errors
def command(
    paths,
    db,
    input_format,
    timezone,
    year,
    host,
    job_id,
    cluster,
    strict,
    fmt,
    as_json,
    explain_after,
    follow,
    interval,
    max_polls,
    engine,
) -> None:
    """Load files or folders (recursively; .gz read transparently) into the store.

    The format of each file is detected from its content. Each file loads in one transaction;
    a file already in the store (same content, read with the same options) is skipped, a file that
    grew since loads only its new lines, and one that changed replaces what it loaded before
    (`synestra forget` removes a source). The report goes to stderr; with --format json or csv, one
    record per file also goes to stdout (JSON schema synestra.ingest/1, docs/formats.md).
    Exit 3 if any file (or folder) could not be loaded; 8 if the store cannot be written.

    With --explain, every job is then explained and the explanations kept in the store: the first
    tax-report after this ingest reuses them instead of explaining each job (for a nightly job).

    With --follow, the paths are polled every --interval seconds until Ctrl-C (exit 130) or SIGTERM
    (exit 143): a new file loads, a grown one adds its new lines, a rotated one (renamed, compressed or
    copytruncate'd by logrotate) is recognised by its content and not loaded twice, and a line still
    being written waits for the next poll. Exit 3 at the end if any file failed.

    \b
    Example:
      synestra ingest /var/export/cluster-2026-11-29/ --timezone Europe/Paris
      synestra ingest /var/export/$(date -u +%F)/ --explain   # nightly: tax-report at once in the morning
      synestra ingest /exports/a100/ --cluster a100 && synestra ingest /exports/h100/ --cluster h100
      synestra ingest --follow /var/log/syslog /var/log/dcgm/ --interval 10
    """
    from synestra_cli.api.loading import IngestOptions, check_cluster_name, follower, ingest
    from synestra_cli.api.shared import InputError

    legacy = click.get_current_context().meta.get("legacy_input_format")
    if legacy:
        refuse_together({"--input-format": input_format, "--format NAME": legacy})
        input_format = legacy
    if as_json:
        refuse_together({"--json": True, f"--format {fmt}": fmt not in (None, "json")})
    fmt = "json" if as_json else fmt or "table"

    try:
        check_cluster_name(cluster)
    except InputError as exc:
        raise click.BadParameter(str(exc), param_hint="--cluster") from exc
    options = IngestOptions(
        timezone=timezone, year=year, host=host, job_id=job_id, strict=strict, format=input_format, cluster=cluster
    )
    if follow and explain_after:
        raise click.UsageError("--explain runs once after an ingest; --follow never ends: run `explain --all` apart")
    if not follow and max_polls is not None:
        raise click.UsageError("--max-polls needs --follow")
    reporter = Reporter(tty=sys.stderr.isatty())
    if follow:
        if engine != "local":
            raise click.UsageError(
                "--follow loads into a store file (--db FILE) on this machine, not a lake or --engine"
            )
        if fmt == "csv":
            raise click.UsageError("--follow reports each poll as a table or as JSON Lines (--format json)")
        from synestra_cli.cli.ingest_follow import run_follow

        poller = follower(db, list(paths), options)
        with stop_on_signals():
            failed_any = run_follow(poller, paths, interval, max_polls, reporter, fmt == "json")
        sys.exit(int(ExitCode.INPUT) if failed_any else 0)
    from synestra_cli.cli.progress import progress_on_tty

    # SIGTERM as Ctrl-C: the file being loaded rolls back, exit 143 (docs/runbook.md)
    with stop_on_signals():
        result = ingest(
            paths,
            db,
            options=options,
            explain=explain_after,
            engine=engine,
            on_file=reporter.on_file,
            on_report=reporter.on_report,
            long_steps=progress_on_tty,
        )
    reports = result.reports
    explained = None
    if result.explained is not None:
        explained = (
            f"explain: {plural(result.explained, 'job')} explained and kept for tax-report"
            if result.explained
            else "explain: no jobs in the store yet"
        )
    loaded = [r for r in reports if r.status == "loaded"]
    failed = [r for r in reports if r.status == "failed"]
    click.echo(
        f"total: {len(loaded)} loaded, {len(reports) - len(loaded) - len(failed)} skipped, {len(failed)} failed; "
        f"{sum(r.rows for r in loaded)} rows, {sum(r.rejected for r in loaded)} rejected",
        err=True,
    )
    if explained:
        click.echo(explained, err=True)
    if fmt == "json":
        click.echo(dumps(result.to_json()))
    elif fmt == "csv":
        render_rows([r.__dict__ for r in reports], CSV_COLUMNS, "csv")
    if failed:
        sys.exit(int(ExitCode.INPUT))
