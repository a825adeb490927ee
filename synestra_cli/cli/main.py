"""Entry point: the `synestra` group. Commands load lazily so that `explain` pays only for its imports."""

from __future__ import annotations

import importlib
import importlib.util
import sys

import click

from synestra_cli import __version__
from synestra_cli.errors import ExitCode

# command name -> module under synestra_cli.cli exposing a click command named `command`
COMMANDS: dict[str, str] = {
    "ingest": "ingest",
    "sources": "sources",
    "forget": "forget",
    "compact": "compact",
    "check": "check",
    "sql": "sql",
    "formats": "formats_cmd",
    "jobs": "jobs",
    "simulate": "simulate",
    "explain": "explain",
    "tax-report": "tax_report",
    "timeline": "timeline",
    "annotations": "annotations",
    "packet": "packet",
    "fleet": "fleet",
    "risks": "risks",
}

EXIT_CODES_HELP = "\n".join(f"  {c.value:>3}  {c.name.lower()}" for c in ExitCode)


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return [name for name, mod in COMMANDS.items() if importlib.util.find_spec(f"synestra_cli.cli.{mod}")]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        mod = COMMANDS.get(cmd_name)
        if mod is None or importlib.util.find_spec(f"synestra_cli.cli.{mod}") is None:
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
    from synestra_cli import settings

    settings.check_all()  # every SYNESTRA_* variable, once: a malformed one is exit 2 before any work


# True in the `synestra` process itself (the console script), not where cli is invoked in another
# program's process (tests' CliRunner, a notebook): only then may a command bound the process (sql).
OWN_PROCESS = False


def main() -> None:  # pragma: no cover - console-script shim
    global OWN_PROCESS
    OWN_PROCESS = True
    sys.exit(cli.main())
