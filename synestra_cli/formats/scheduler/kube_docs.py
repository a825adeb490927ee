"""Kubernetes API objects as kubectl prints them, into one DuckDB table of items.

`kubectl get ... -o json` prints one object or a List (`items`); `-o yaml` the same in YAML; `kubectl get -w
-o json` and `kubectl cluster-info dump` print several JSON documents one after another (a NodeList, then an
EventList, ...), and YAML files hold several documents separated by `---`. Lists from the API
(`PodList`, `EventList`) leave `kind` out of their items: an item's kind is then its List's without `List`.

Python only finds where each document begins (json's raw_decode, yaml's composer, both in C) and hands
DuckDB the documents as JSON text; unnesting the items and reading their fields is SQL. YAML timestamps
stay strings (kubectl quotes them in new versions, old PyTorchJob outputs do not), as JSON has them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import pyarrow as pa
import yaml

from synestra_cli.errors import InputError

# A JSON document, or the start of a YAML one naming an API object (its apiVersion or kind, at any depth
# of a pasted document: a List's items are indented).
JSON_START = re.compile(r"\A\s*[\[{]")


class _Loader(yaml.CSafeLoader if hasattr(yaml, "CSafeLoader") else yaml.SafeLoader):  # type: ignore[misc]
    """Safe YAML without timestamps: `2018-12-16T21:39:09Z` stays the string the JSON output would hold."""


_Loader.yaml_implicit_resolvers = {
    k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:timestamp"]
    for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


@dataclass
class Documents:
    lines: list[int]  # 1-based line each document begins on
    texts: list[str]  # each as JSON text
    rest_line: int | None = None  # a JSON file's trailing text that is no JSON document: from this line
    rest: str = ""

    def table(self) -> pa.Table:
        return pa.table(
            {
                "doc_no": pa.array(range(1, len(self.texts) + 1), pa.int64()),
                "line": pa.array(self.lines, pa.int64()),
                "doc": pa.array(self.texts, pa.string()),
            }
        )


def _line_at(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _json_documents(text: str, display: str) -> Documents:
    decoder = json.JSONDecoder(strict=False)  # kubectl cluster-info dump keeps raw newlines in annotations
    docs = Documents([], [])
    pos, n = 0, len(text)
    while True:
        while pos < n and text[pos] in " \t\r\n":
            pos += 1
        if pos >= n:
            return docs
        if text[pos] not in "{[":
            if not docs.texts:
                raise InputError(f"{display}:{_line_at(text, pos)}: not a JSON document")
            docs.rest_line, docs.rest = _line_at(text, pos), text[pos:]
            return docs
        try:
            obj, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise InputError(f"{display}:{exc.lineno}: unreadable JSON ({exc.msg})") from exc
        docs.lines.append(_line_at(text, pos))
        # written again: DuckDB's JSON reader refuses the raw control characters json reads with strict=False
        docs.texts.append(json.dumps(obj))
        pos = end


def _yaml_documents(text: str, display: str) -> Documents:
    docs = Documents([], [])
    loader = _Loader(text)
    try:
        while loader.check_node():
            node = loader.get_node()
            data = loader.construct_document(node)
            if data is None:
                continue
            docs.lines.append(node.start_mark.line + 1)
            docs.texts.append(json.dumps(data, default=str))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        raise InputError(f"{display}{where}: unreadable YAML ({getattr(exc, 'problem', exc)})") from exc
    finally:
        loader.dispose()
    return docs


def read_documents(text: str, display: str) -> Documents:
    """The documents of a kubectl output, JSON or YAML; InputError naming the line that cannot be read."""
    return _json_documents(text, display) if JSON_START.match(text) else _yaml_documents(text, display)


# The documents' items: a List's items (kind from the List when the item has none), else the document.
ITEMS_SQL = """
CREATE OR REPLACE TEMP TABLE _kube_items AS
WITH d AS (SELECT doc_no, line, doc::JSON AS doc FROM kube_docs_arrow),
one AS (
    SELECT doc_no, line, doc, json_type(doc) = 'ARRAY' AS bare_array,
           CASE WHEN json_type(doc) = 'ARRAY' THEN doc
                WHEN json_type(doc->'items') = 'ARRAY' THEN doc->'items' END AS list
    FROM d
), items AS (
    SELECT doc_no, line, doc->>'kind' AS list_kind, unnest(CAST(list AS JSON[])) AS item,
           generate_subscripts(CAST(list AS JSON[]), 1) AS item_no
    FROM one WHERE list IS NOT NULL
    UNION ALL
    SELECT doc_no, line, NULL, doc, 0 FROM one WHERE list IS NULL AND json_type(doc) = 'OBJECT'
)
SELECT doc_no, line, item_no,
       coalesce(item->>'kind', CASE WHEN list_kind LIKE '%List' AND list_kind <> 'List'
                                    THEN left(list_kind, -4) END) AS kind,
       item->>'apiVersion' AS api_version, item
FROM items
"""
