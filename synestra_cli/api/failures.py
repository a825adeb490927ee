"""A DuckDB error as the store's own (locked, busy, damaged, read-only...), for the CLI's error handler:
re-exported so that the CLI reaches the library through `synestra_cli.api` only. Imports DuckDB."""

from synestra_cli.store.connect import as_store_error

__all__ = ["as_store_error"]
