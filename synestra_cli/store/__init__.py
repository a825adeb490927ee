"""The embedded DuckDB store, a file or a lake behind one door (store/door.py): one connection factory,
ordered migrations, the SQL helpers."""

from synestra_cli.store.connect import DEFAULT_DB, resolve_db_path
from synestra_cli.store.door import Store, open_store

__all__ = ["DEFAULT_DB", "Store", "open_store", "resolve_db_path"]
