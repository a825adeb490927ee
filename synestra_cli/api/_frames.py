"""What every api module shares: how a store is named, and rows as a pandas DataFrame (imported only
when asked for)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

# A context each long library step runs in (a migration, explaining every job): the CLI draws a progress
# bar on a terminal there (cli/progress.py); a script passes nothing.
LongSteps = Callable[[], AbstractContextManager[Any]]
Db = str | Path | None  # the store: a path or a lake's folder or URL, else $SYNESTRA_DB, else ./synestra.duckdb


def frame(rows: Sequence[Mapping[str, Any]], columns: list[str]) -> pd.DataFrame:
    import pandas as pd

    return pd.DataFrame(rows, columns=columns)


@dataclass(frozen=True)
class Table:
    """Rows of one kind (jobs, attempts, sources) with their columns and the schema id of their document."""

    schema: str  # e.g. synestra.jobs/2
    key: str  # the document's list: {"schema": ..., key: [rows]}
    columns: list[str]
    rows: list[dict[str, Any]]

    def to_json(self) -> dict[str, Any]:
        return {"schema": self.schema, self.key: [{c: r.get(c) for c in self.columns} for r in self.rows]}

    def to_pandas(self) -> pd.DataFrame:
        return frame(self.rows, self.columns)
