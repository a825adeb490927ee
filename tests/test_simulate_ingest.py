"""Every scenario's exports ingest with zero rejects, and the store agrees with the truth."""

from __future__ import annotations

import json

import pytest

from synestra_cli.formats.base import IngestOptions
from synestra_cli.ingest import ingest_paths
from synestra_cli.simulate.scenarios import SCENARIOS, simulate
from synestra_cli.store.connect import memory_store


def _ingest(out, subdirs=None):
    conn = memory_store()
    exports = out / "exports"
    paths = [exports / d for d in subdirs] if subdirs else [exports]
    return conn, ingest_paths(conn, paths, IngestOptions())


@pytest.mark.heavy
@pytest.mark.parametrize("seed", [11, 12])
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_every_scenario_ingests_with_zero_rejects(tmp_path, scenario, seed):
    simulate(tmp_path, scenario, seed=seed, nodes=8, hours=2.0, gpus_per_node=2)
    conn, reports = _ingest(tmp_path)
    try:
        bad = [
            (r.path, r.status, r.error, r.rejected, r.reject_samples[:2])
            for r in reports
            if r.status != "loaded" or r.rejected
        ]
        assert not bad
        truth = json.loads((tmp_path / "truth.json").read_text())
        saves = conn.execute(
            "SELECT job_id, iteration FROM checkpoints WHERE kind = 'save' "
            "AND coalesce(phase, 'finalized') = 'finalized' ORDER BY ALL"
        ).fetchall()
        want = sorted(
            (j["job"], c["iteration"]) for j in truth["jobs"] for c in j["checkpoints"] if c["kind"] == "save"
        )
        assert saves == want
        hosts = {r[0] for r in conn.execute("SELECT DISTINCT host FROM metrics").fetchall()}
        assert {f"gpu-{i:03d}" for i in range(1, 9)} <= hosts
    finally:
        conn.close()


@pytest.mark.heavy
def test_gzip_exports_ingest_like_plain_ones(tmp_path):
    simulate(tmp_path / "plain", "link-flap", seed=3, nodes=8, hours=1.0, gpus_per_node=2)
    simulate(tmp_path / "gz", "link-flap", seed=3, nodes=8, hours=1.0, gpus_per_node=2, gz=True)
    counts = []
    for name in ("plain", "gz"):
        conn, reports = _ingest(tmp_path / name, ["syslog", "dcgm", "node_exporter", "snmp"])
        assert all(r.status == "loaded" and not r.rejected for r in reports)
        counts.append(conn.execute("SELECT (SELECT count(*) FROM metrics), (SELECT count(*) FROM events)").fetchone())
        conn.close()
    assert counts[0] == counts[1] and counts[0][0] > 0


def test_optics_long_csv_ingests_with_zero_rejects(tmp_path):
    simulate(tmp_path, "ghost-link", seed=3, nodes=8, hours=1.0, gpus_per_node=2)
    conn, reports = _ingest(tmp_path, ["optics"])
    try:
        assert all(r.status == "loaded" and not r.rejected for r in reports)
        (n, hosts) = conn.execute(
            "SELECT count(*), count(DISTINCT host) FROM metrics "
            "WHERE metric = 'optics_rx_power_dbm' AND entity LIKE 'mlx5_%'"
        ).fetchone()
        assert n > 0 and hosts == 8
    finally:
        conn.close()
