"""`synestra packet`: a job's (or one checkpoint's) explanation as a tar.gz for a provider (library:
synestra_cli.explain.packet)."""

from __future__ import annotations

from pathlib import Path

import click

from synestra_cli.cli.common import handle_errors
from synestra_cli.cli.options import db_option
from synestra_cli.cli.output import OUTPUT_TARGET

SUFFIXES = {".tar.gz": "tar.gz", ".tgz": "tar.gz"}


@click.command("packet")
@click.option("--job", "job_id", required=True, help="Job id (as `synestra jobs` lists it).")
@click.option("--checkpoint", type=int, help="Only the checkpoint(s) at this iteration.")
@click.option("-o", "--output", "output", required=True, type=OUTPUT_TARGET, help="The .tar.gz to write; - for stdout.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["tar.gz"]),
    help="What to write (default: by the suffix of --output, .tar.gz or .tgz; another suffix is refused).",
)
@db_option
@handle_errors
def command(job_id: str, checkpoint: int | None, output: Path, fmt: str | None, db: str | None) -> None:
    """Write what a vendor's RMA desk or a fabric team asks for, in one tar.gz: the ticket (Markdown),
    the picture (PNG), the explanation (JSON), every cited log line with 3 lines of context from its
    file, the asset identities (GPU UUID, serial, PCI id, cable ends, rack hosts), the store's sha256
    of each cited file, and a README saying what was left out and why. Nothing from outside the job's
    hosts and windows. The same store gives the same bytes (sorted members, fixed times).

    \b
    Exit codes: 0 written, 2 bad -o, 5 unknown job or checkpoint, 6 store without jobs.

    \b
    Examples:
      synestra packet --job 1003 -o job-1003.tar.gz
      synestra packet --job 1003 --checkpoint 1950 -o rma-gpu-002.tar.gz && tar tzvf rma-gpu-002.tar.gz
    """
    from synestra_cli.api.shared import path, relative_in
    from synestra_cli.api.views import packet_facts
    from synestra_cli.api.views import packets as packet
    from synestra_cli.api.words import job_markdown
    from synestra_cli.cli import output as out
    from synestra_cli.cli.progress import status_on_tty
    from synestra_cli.cli.render import dumps
    from synestra_cli.cli.timeline_chart import render

    out.format_of(output, fmt, SUFFIXES, option="--format tar.gz")
    with status_on_tty(f"explaining job {job_id}") as status:
        facts = packet_facts(job_id, db, checkpoint)
        job_id, job, chosen, lines = facts.job_id, facts.job, facts.chosen, facts.lines
        cited, total, tl = facts.cited, facts.total, facts.timeline
        status(f"drawing the picture of job {job_id}")
        picture = render(tl, "png")
    evidence, missing = packet.evidence_text(lines, path)
    doc = job.to_json()
    if chosen is not None:
        doc["checkpoints"] = [d for d, c in zip(doc["checkpoints"], job.checkpoints, strict=True) if c in chosen]
        doc["failures"] = []
    files = {
        "README.txt": packet.readme(job, checkpoint, len(lines), len(cited), total, missing),
        "ticket.md": relative_in(job_markdown(job, chosen)),
        "explain.json": dumps(doc) + "\n",
        "evidence.txt": evidence,
        "assets.json": dumps({"schema": packet.SCHEMA, "assets": packet.assets(job, checkpoint)}) + "\n",
        "sources.json": dumps({"schema": packet.SCHEMA, "sources": cited}) + "\n",
    }
    data = {k: v.encode() for k, v in files.items()} | {"timeline.png": picture}
    top = f"synestra-job-{job_id}" + (f"-checkpoint-{checkpoint}" if checkpoint is not None else "")
    out.write(output, packet.tar_gz(data, top))
    click.echo(f"{out.shown(output)}: packet of job {job_id}, {len(data)} files, {len(lines)} evidence lines", err=True)
