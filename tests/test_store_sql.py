"""The store toolkit (store/sql.py): each helper does what its callers rely on, on a plain connection."""

from __future__ import annotations

from datetime import datetime

import duckdb
import pyarrow as pa
import pytest

from synestra_cli.store.sql import (
    drop_temp,
    fetch_one,
    has_table,
    insert_rows,
    one_row,
    placeholders,
    registered,
    scalar,
    temp_table,
    transaction,
)


@pytest.fixture
def conn():
    c = duckdb.connect(":memory:")
    yield c
    c.close()


def test_one_row_and_scalar_read_an_aggregate_and_leave_the_connection_free(conn):
    assert one_row(conn, "SELECT count(*), max(x) FROM range(5) t(x)") == (5, 4)
    assert scalar(conn, "SELECT sum(x) FROM range(?) t(x)", [4]) == 6
    assert fetch_one(conn, "SELECT 1 WHERE false") is None


def test_one_row_refuses_a_query_that_returned_nothing(conn):
    with pytest.raises(LookupError, match="no row"):
        one_row(conn, "SELECT 1 WHERE false")


def test_a_registered_table_is_gone_after_the_block_even_on_error(conn):
    table = pa.table({"x": [1, 2, 3]})
    with pytest.raises(RuntimeError), registered(conn, "_t", table):
        assert scalar(conn, "SELECT sum(x) FROM _t") == 6
        raise RuntimeError("the step failed")
    with pytest.raises(duckdb.CatalogException):
        conn.execute("SELECT * FROM _t")


def test_temp_table_builds_typed_columns_in_one_statement(conn):
    # `at` is an SQL keyword: the names are quoted
    temp_table(conn, "_cols", {"job": ("VARCHAR", ["a", "b"]), "at": ("TIMESTAMP", [datetime(2026, 1, 1), None])})
    assert conn.execute('SELECT job, "at" FROM _cols ORDER BY job').fetchall() == [
        ("a", datetime(2026, 1, 1)),
        ("b", None),
    ]
    types = dict(
        conn.execute("SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = '_cols'").fetchall()
    )
    assert types == {"job": "VARCHAR", "at": "TIMESTAMP"}
    temp_table(conn, "_cols", {"job": ("VARCHAR", ["c"])})  # replaced, not appended to
    assert scalar(conn, "SELECT count(*) FROM _cols") == 1


def test_insert_rows_writes_every_row_and_nothing_for_none(conn):
    conn.execute("CREATE TEMP TABLE _r (k VARCHAR, v DOUBLE)")
    insert_rows(conn, "_r", [])
    insert_rows(conn, "_r", [("a", 1.0), ("b", None), ("it's", 2.5)])
    assert conn.execute("SELECT * FROM _r ORDER BY k").fetchall() == [("a", 1.0), ("b", None), ("it's", 2.5)]


def test_placeholders_bind_each_value_and_an_empty_list_matches_nothing(conn):
    values = ["x", "y'"]
    sql = f"SELECT count(*) FROM (VALUES ('x'), ('y'''), ('z')) t(v) WHERE v IN ({placeholders(len(values))})"
    assert scalar(conn, sql, values) == 2
    assert scalar(conn, f"SELECT count(*) FROM range(3) WHERE range IN ({placeholders(0)})") == 0


def test_drop_temp_drops_what_exists_and_ignores_what_does_not(conn):
    conn.execute("CREATE TEMP TABLE _a AS SELECT 1 AS x; CREATE TEMP VIEW _v AS SELECT 2 AS y")
    drop_temp(conn, ["_a", "_never_made"], views=["_v"])
    left = scalar(conn, "SELECT count(*) FROM duckdb_tables() WHERE table_name IN ('_a', '_v')")
    left += scalar(conn, "SELECT count(*) FROM duckdb_views() WHERE view_name = '_v'")
    assert left == 0


def test_a_failed_transaction_leaves_nothing_behind(conn):
    conn.execute("CREATE TABLE t (x INTEGER)")
    with pytest.raises(duckdb.ConversionException), transaction(conn):
        conn.execute("INSERT INTO t VALUES (1)")
        conn.execute("INSERT INTO t VALUES ('not a number')")
    assert scalar(conn, "SELECT count(*) FROM t") == 0


def test_has_table_asks_the_current_database_and_tells_temporary_tables_apart(conn, tmp_path):
    conn.execute("CREATE TABLE kept (a INT); CREATE TEMP TABLE scratch (a INT); CREATE VIEW seen AS SELECT 1")
    conn.execute(f"ATTACH '{tmp_path / 'other.duckdb'}' AS other; CREATE TABLE other.elsewhere (a INT)")
    assert has_table(conn, "kept") and has_table(conn, "scratch", temporary=True)
    assert not has_table(conn, "scratch") and not has_table(conn, "kept", temporary=True)
    assert not has_table(conn, "seen")  # a view is not a table
    assert not has_table(conn, "elsewhere")  # an attached store's table is not this one's
    conn.execute("USE other")
    assert has_table(conn, "elsewhere") and not has_table(conn, "kept")
