"""The explain document (explain/document.py): what to_json writes is exactly the typed document, and
reading it back (memo.from_json) gives the same document again, fresh or kept."""

from __future__ import annotations

import json
from typing import Any

from explain_fixtures import SAVE_S, Scenario, bus_id

from synestra_cli.accounting.kept import explanations as memo
from synestra_cli.explain.document import CauseDoc, CheckpointDoc, ExplainDoc, FailureDoc, LinkDoc
from synestra_cli.explain.job import explain_job


def _gpu_lost_and_restarted(conn) -> None:
    """gpu-002 falls off the bus; attempt 1 fails, attempt 2 restores iteration 200 and goes on."""
    sc = Scenario(conn).cluster()
    t = sc.steps(1, 0, 10, 200)
    sc.checkpoint(1, "save", 200, t)
    t = sc.steps(1, t + SAVE_S, 210, 300)
    sc.event(t - 6, "gpu-002", "xid", bus_id(3), 79)
    sc.event(t - 5, "gpu-002", "gpu_fell_off_bus", bus_id(3))
    sc.attempt(1, -60, t + 30, "FAILED", "1:0")
    sc.checkpoint(2, "restore", 200, t + 400)
    end = sc.steps(2, t + 400 + SAVE_S, 210, 400)
    sc.checkpoint(2, "save", 400, end)
    sc.attempt(2, t + 300, end + SAVE_S + 30, "COMPLETED")


def _keys(doc: dict[str, Any], typed: Any) -> None:
    assert set(doc) == set(typed.__required_keys__), typed.__name__


def test_the_document_has_exactly_the_typed_keys_at_every_level(conn):
    _gpu_lost_and_restarted(conn)
    doc = explain_job(conn, "100").to_json()
    _keys(doc, ExplainDoc)
    causes = [c["cause"] for c in doc["checkpoints"] if c["cause"]]
    assert any(c["category"] == "gpu.fell_off_bus" for c in causes)  # the document has a cause to check
    for cp in doc["checkpoints"]:
        _keys(cp, CheckpointDoc)
    for f in doc["failures"]:
        _keys(f, FailureDoc)
    for cause in causes + [a for cp in doc["checkpoints"] for a in cp["alternatives"]]:
        _keys(cause, CauseDoc)
    links = [lk for cp in doc["checkpoints"] for lk in cp["chain"]]
    assert links
    for lk in links:
        _keys(lk, LinkDoc)


def test_reading_a_document_back_gives_the_same_document_fresh_or_kept(conn):
    _gpu_lost_and_restarted(conn)
    doc = explain_job(conn, "100").to_json()
    assert memo.from_json(doc).to_json() == doc  # fresh: datetimes in place
    text = json.dumps(doc, default=memo._iso, sort_keys=True)  # as the store keeps it
    kept = memo.from_json(json.loads(text, object_hook=memo._datetimes)).to_json()
    assert kept == doc  # every datetime back, the evidence's too: a kept explanation prints as a fresh one
