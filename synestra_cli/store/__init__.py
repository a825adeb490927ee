"""The embedded DuckDB store: one connection factory, ordered migrations, the SQL helpers."""

from synestra_cli.store.connect import DEFAULT_DB, open_store, resolve_db_path

__all__ = ["DEFAULT_DB", "open_store", "resolve_db_path"]
