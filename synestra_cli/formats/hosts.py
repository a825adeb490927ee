"""One host-name normalisation for every source, so that the same machine joins across them.

Syslog prints `node1.cluster.local` or `node1`, dcgm-exporter's `Hostname` label and torchrun's ChildFailedError
(socket.getfqdn()) the FQDN, Slurm the short node name: a host is its name up to the first dot (an IPv4 address
is kept whole). The full name is not lost: each source records the full names it saw in `host_names`.
"""

from __future__ import annotations


def short_host_sql(expr: str) -> str:
    """SQL for the short host name of `expr` (a column or expression of this module's callers, never user text)."""
    return (
        f"CASE WHEN contains({expr}, '.') AND NOT regexp_full_match({expr}, '[0-9.]+') "
        f"THEN split_part({expr}, '.', 1) ELSE {expr} END"
    )


HOST_NAMES_INSERT = "INSERT INTO host_names (host, name, source_id) "


def full_names_select_sql(source: str, column: str, sid: str = "$sid") -> str:
    """The (short host, full name, source) rows record_full_names_sql inserts."""
    return (
        f"SELECT DISTINCT {short_host_sql(column)}, {column}, {sid} FROM {source} "
        f"WHERE {column} IS NOT NULL AND {short_host_sql(column)} <> {column} ORDER BY 1, 2"
    )


def record_full_names_sql(source: str, column: str, sid: str = "$sid") -> str:
    """INSERT of the (short host, full name) pairs of `column` in relation `source` for source `sid`
    (the parameter $sid, or a column of `source` naming each row's source)."""
    return HOST_NAMES_INSERT + full_names_select_sql(source, column, sid)
