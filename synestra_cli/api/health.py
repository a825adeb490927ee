"""`synestra fleet` and `synestra risks`: the parts that cost the most across every job of a window, the
lemons among them and the nodes to exclude, and the parts degrading now (fleet/)."""

from __future__ import annotations

from datetime import datetime, timedelta

from synestra_cli.accounting.kept.explanations import save_to
from synestra_cli.api._frames import Db
from synestra_cli.fleet.exclude import ExclusionList, exclusion_list
from synestra_cli.fleet.lemons import FleetReport, fleet_report
from synestra_cli.fleet.risks import HISTORY, RiskReport, risks_at
from synestra_cli.store import open_store

__all__ = ["ExclusionList", "FleetReport", "RiskReport", "exclusions", "fleet", "risks"]


def fleet(
    db: Db = None, *, since: datetime | None = None, until: datetime | None = None, by: str = "component"
) -> FleetReport:
    """Hosts, GPUs, links, racks and filesystems ranked by what they cost every job of the window, the
    lemons among them (`synestra fleet`; `to_json()`: synestra.fleet/1). The explanations it computes are
    kept: the next fleet or tax-report reuses them."""
    with open_store(db, read_only=True) as conn:
        report = fleet_report(conn, since, until, by=by)
    save_to(db, report.key, report.computed)
    return report


def exclusions(db: Db = None, *, since: datetime | None = None, until: datetime | None = None) -> ExclusionList:
    """The nodes to take out of service, each with its cause and evidence (`fleet --exclude`;
    `to_json()`: synestra.exclude/1; `slurm()`, `kubernetes()`, `hostlist()`: the commands, never run)."""
    with open_store(db, read_only=True) as conn:
        found, report = exclusion_list(conn, since, until)
    save_to(db, report.key, report.computed)
    return found


HISTORY_HOURS = HISTORY.total_seconds() / 3600  # a week


def risks(db: Db = None, *, at: datetime | None = None, history_hours: float | None = HISTORY_HOURS) -> RiskReport:
    """The components degrading at `at` (default: the store's latest data), known lemons looked for
    `history_hours` back (default a week; None or 0: not at all) (`synestra risks`; `to_json()`: synestra.risks/1)."""
    with open_store(db, read_only=True) as conn:
        return risks_at(conn, at, timedelta(hours=history_hours) if history_hours else None)
