"""Entry point: the `synestra` group. Commands load lazily so that `explain` pays only for its imports."""

from __future__ import annotations

import importlib
import importlib.util
import sys

import click

from synestra_cli.api.shared import ExitCode, __version__

# command name -> (module under synestra_cli.cli exposing a click command named `command`, the start of its help's
# first paragraph). `synestra --help` lists the commands from these words, without importing a command: each
# imports what it needs (ingest: pyarrow and every parser), ~0.4 s of a help screen. tests/test_startup.py
# holds them to the commands' own help.
COMMANDS: dict[str, tuple[str, str]] = {
    "ingest": ("ingest", "Load files or folders (recursively; .gz read transparently) into the store."),
    "sources": ("sources", "List ingested files: format, rows, rejected lines, time span, hosts."),
    "forget": (
        "forget",
        "Remove sources, by id or by path as `synestra sources` lists them, and every row they wrote, in one",
    ),
    "compact": (
        "compact",
        "Compact a lake: in each partition (a table, or a table's day and host bucket), every run of two or more",
    ),
    "check": (
        "check",
        "Check that the store is whole. A store file is read whole, every table and column (DuckDB verifies each",
    ),
    "sql": ("sql", "Run a read-only SQL QUERY against the store (tables: docs/data-model.md)."),
    "formats": ("formats_cmd", "List the input formats (names usable with `ingest --input-format NAME`)."),
    "jobs": (
        "jobs",
        "List jobs: name, user, state, attempts, GPUs, hosts, first/last time, steps, saves, restores, incidents.",
    ),
    "simulate": (
        "simulate",
        "Simulate a GPU cluster that fails in a known way: OUTDIR/exports/ holds syslog, DCGM, fabric counters,",
    ),
    "explain": (
        "explain",
        "Explain every checkpoint of a job: routine, reactive, restart, preemption or final, and for the non-routine",
    ),
    "tax-report": (
        "tax_report",
        "Account the checkpoint tax: each job's wall time in buckets that sum to it, the causes that cost most,",
    ),
    "timeline": (
        "timeline",
        "Draw a job's timeline, a picture that stands alone: its title and headline (job, verdict, action, checkpoint",
    ),
    "annotations": (
        "annotations",
        "Grafana annotations (time and timeEnd in epoch ms, tags, text) for every checkpoint of a job and each",
    ),
    "packet": (
        "packet",
        "Write what a vendor's RMA desk or a fabric team asks for, in one tar.gz: the ticket (Markdown), the picture",
    ),
    "fleet": (
        "fleet",
        "Hosts, GPUs, NICs/links, racks and filesystems ranked by the GPU-hours, failures and incidents they cost",
    ),
    "risks": (
        "risks",
        "Components degrading now, before they cost a checkpoint: error-counter rates rising, receive power sagging,",
    ),
}

EXIT_CODES_HELP = "\n".join(f"  {c.value:>3}  {c.name.lower()}" for c in ExitCode)


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return [name for name, (mod, _) in COMMANDS.items() if importlib.util.find_spec(f"synestra_cli.cli.{mod}")]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        mod, _ = COMMANDS.get(cmd_name, ("", ""))
        if not mod or importlib.util.find_spec(f"synestra_cli.cli.{mod}") is None:
            return None
        return importlib.import_module(f"synestra_cli.cli.{mod}").command

    def resolve_command(self, ctx: click.Context, args: list[str]):
        """An unknown command names the nearest known ones (`explian`: did you mean explain?)."""
        name = args[0] if args else ""
        if name and not name.startswith("-") and self.get_command(ctx, name) is None:
            import difflib

            near = difflib.get_close_matches(name, self.list_commands(ctx), n=3, cutoff=0.6)
            hint = f" Did you mean {' or '.join(near)}?" if near else ""
            ctx.fail(f"No such command {name!r}.{hint} (synestra --help lists them)")
        return super().resolve_command(ctx, args)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """click's listing, each command's short help cut from COMMANDS as click cuts it from the help."""
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows = [(name, short_help(name, limit)) for name in names]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def invoke(self, ctx: click.Context):
        # Around every command, also what happens outside its own handler (an import, click's last
        # flush): Ctrl-C is 130 and a closed pipe 0, never click's "Aborted!" with exit 1.
        from synestra_cli.cli.common import handle_errors

        return handle_errors(super().invoke)(ctx)


@click.group(
    cls=LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog=f"Exit codes:\n\n\b\n{EXIT_CODES_HELP}\n\nDocs: docs/ in the source tree.",
)
@click.version_option(__version__, "--version", prog_name="synestra")
def cli() -> None:
    """Synestra: explain every checkpoint of a training job and account the checkpoint tax,
    offline, from the logs and metrics a cluster already exports.

    \b
    Example:
      synestra ingest sample_data/exports && synestra explain --job 1003 --tax
    """
    from synestra_cli.api.shared import settings

    settings.check_all()  # every SYNESTRA_* variable, once: a malformed one is exit 2 before any work


# True in the `synestra` process itself (the console script), not where cli is invoked in another
# program's process (tests' CliRunner, a notebook): only then may a command bound the process (sql).
OWN_PROCESS = False


def short_help(name: str, limit: int) -> str:
    """The command's line in the listing, as click cuts it from the command's own help."""
    return click.Command(name, help=COMMANDS[name][1]).get_short_help_str(limit)


def main() -> None:  # pragma: no cover - console-script shim
    global OWN_PROCESS
    OWN_PROCESS = True
    sys.exit(cli.main())
