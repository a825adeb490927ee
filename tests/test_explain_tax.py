"""explain carries the tax: each checkpoint's cost and the badput charged through its cause, the same
seconds tax-report computes."""

from __future__ import annotations

import pytest
from explain_fixtures import SAVE_S, reactive_job_with_a_lossy_port

from synestra_cli.accounting.checkpoint_tax import explain_with_tax
from synestra_cli.accounting.report import tax_report


def test_each_checkpoint_carries_its_cost_and_the_job_its_tax(conn):
    reactive_job_with_a_lossy_port(conn, recovers=True)
    job = explain_with_tax(conn, "100")
    by_it = {c.iteration: c for c in job.checkpoints}
    assert by_it[200].tax["buckets_s"] == {"checkpoint_save": pytest.approx(SAVE_S)}
    reactive = by_it[330].tax["buckets_s"]
    assert reactive["checkpoint_save"] == pytest.approx(SAVE_S) and reactive["degraded_throughput"] > 0
    assert by_it[330].tax["gpu_hours"] == pytest.approx(by_it[330].tax["seconds"] * 32 / 3600)
    truth = tax_report(conn, "100").jobs[0].buckets
    assert job.tax["buckets_s"] == truth.buckets_s and job.tax["wall_s"] == truth.wall_s
    assert job.tax["by_cause"][0]["category"] == "network.link_degraded"


def test_a_filtered_view_carries_no_job_tax(conn):
    reactive_job_with_a_lossy_port(conn, recovers=True)
    assert explain_with_tax(conn, "100", checkpoint=330).tax is None
