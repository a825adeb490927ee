"""The handles of staged temp tables (signals/staging.py): a step's SQL gets the names of the tables it is
handed, and nothing else of its text changes."""

import duckdb
import pytest

from synestra_cli.signals.anomalies import anomalies
from synestra_cli.signals.scope_samples import RULES, SCOPE, empty_scope, load_rules
from synestra_cli.signals.staging import TempTable, staged_sql


def test_staged_sql_puts_each_handle_s_name_where_its_key_is_and_leaves_other_braces():
    samples = TempTable("_x_samples", ("ts", "value"))
    sql = staged_sql(
        "SELECT {'lo': 1} AS s FROM {samples} WHERE ({spans}) AND x IN (SELECT y FROM {samples})", samples=samples
    )
    assert sql == "SELECT {'lo': 1} AS s FROM _x_samples WHERE ({spans}) AND x IN (SELECT y FROM _x_samples)"


def test_a_handle_the_sql_does_not_read_is_an_error():
    with pytest.raises(ValueError, match="no table"):
        staged_sql("SELECT 1", samples=TempTable("_x", ("a",)))


@pytest.mark.parametrize("name", ["x", "_X", "_x; DROP TABLE metrics", "_x y", ""])
def test_a_handle_s_name_is_an_identifier_of_the_code_s_own(name):
    with pytest.raises(ValueError, match="not a temp table name"):
        TempTable(name, ())


def test_the_anomalies_read_the_samples_of_the_handle_they_are_given():
    conn = duckdb.connect()
    rules = load_rules(conn)
    samples = empty_scope(conn)
    assert (rules, samples) == (RULES, SCOPE) and samples.rows(conn) == 0
    other = TempTable("_other_samples", SCOPE.columns)
    conn.execute(f"CREATE TEMP TABLE {other} AS SELECT * FROM {SCOPE}")
    base = [(f"2026-01-01 00:{m:02d}:00", "h1", "gpu0", "gpu_temp_celsius", 60.0) for m in range(30)]
    hot = [(f"2026-01-01 00:{m:02d}:00", "h1", "gpu0", "gpu_temp_celsius", 99.0) for m in range(30, 40)]
    conn.executemany(f"INSERT INTO {other} VALUES (?::TIMESTAMP, ?, ?, ?, ?)", base + hot)
    assert anomalies(conn, samples=samples, rules=rules) == []  # the default scope holds nothing
    [found] = anomalies(conn, samples=other, rules=rules)
    assert (found.host, found.metric, found.peak) == ("h1", "gpu_temp_celsius", 99.0)
    other.drop(conn)
    assert conn.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = '_other_samples'").fetchone() == (0,)
