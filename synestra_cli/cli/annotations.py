"""`synestra annotations`: Grafana annotations for checkpoints and causes (library: explain.annotations)."""

from __future__ import annotations

import click

from synestra_cli.cli.common import handle_errors
from synestra_cli.cli.options import db_option, format_option, job_option, require_one


@click.command("annotations")
@job_option()
@click.option("--all", "all_jobs", is_flag=True, help="Every job in the store.")
@click.option("--dashboard-uid", help="Scope the annotations to this dashboard (else they are the organisation's).")
@click.option("--panel-id", type=click.IntRange(min=0), help="And to this panel of it (with --dashboard-uid).")
@db_option
@format_option("json", "jsonl", "json-datasource", default="json")
@handle_errors
def command(
    jobs: tuple[str, ...], all_jobs: bool, dashboard_uid: str | None, panel_id: int | None, db: str | None, fmt: str
) -> None:
    """Grafana annotations (time and timeEnd in epoch ms, tags, text) for every checkpoint of a job and
    each of its causes once, ready for Grafana's annotations HTTP API.

    \b
    json: {"schema": "synestra.annotations/1", "annotations": [...]}; jsonl: one bare annotation per
    line, each a body for POST /api/annotations (docs/explain.md); json-datasource: the list a Grafana
    JSON data source answers /annotations with (time, timeEnd, isRegion, title, text, tags).
    Each carries a stable tag synestra-id:<hex> (the same on every run): to re-post from cron without
    duplicates, delete the job's annotations by tag first (docs/explain.md "Grafana").
    Exit codes: 0 written, 2 --panel-id without --dashboard-uid, 5 unknown job, 6 store without jobs.

    \b
    Examples:
      synestra annotations --job 1003 | jq '.annotations | length'
      synestra annotations --job 1003 --format jsonl | while read -r a; do
        curl -sS -X POST -H "Authorization: Bearer $GRAFANA_TOKEN" -H 'Content-Type: application/json' \\
             -d "$a" "$GRAFANA_URL/api/annotations"; done
    """
    require_one({"--job": jobs, "--all": all_jobs})
    if panel_id is not None and not dashboard_uid:
        raise click.UsageError("--panel-id needs --dashboard-uid (a panel belongs to a dashboard)")
    from synestra_cli.api.views import grafana_annotations
    from synestra_cli.cli.render import dumps

    found = grafana_annotations(db, jobs=jobs, all_jobs=all_jobs)
    if fmt == "jsonl":
        for a in found.each(dashboard_uid, panel_id):
            click.echo(dumps(a))
    elif fmt == "json-datasource":
        click.echo(dumps(found.datasource()))
    else:
        click.echo(dumps(found.to_json(dashboard_uid, panel_id)))
