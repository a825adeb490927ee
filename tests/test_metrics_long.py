"""Long-form metrics: CSV and Parquet `timestamp,host,entity,metric,value`."""

from __future__ import annotations

from datetime import datetime

import pyarrow as pa
import pyarrow.parquet as pq

from synestra_cli.formats.base import IngestOptions
from synestra_cli.formats.telemetry import metrics_long
from synestra_cli.ingest import ingest_file

CSV = """timestamp,host,entity,metric,value
2026-11-29T14:02:11.123Z,gpu-017,mlx5_3,optics_rx_power_dbm,-7.9
1795000000,gpu-017,mlx5_3,optics_rx_power_dbm,-8.1
2026-11-29 15:00:00,gpu-017,gpu2,DCGM_FI_DEV_GPU_TEMP_CELSIUS,66
2026-11-29T14:02:11+01:00,"leaf-02","Ethernet21",if_in_errors_total,"3"
not-a-time,gpu-017,mlx5_3,optics_rx_power_dbm,-8
2026-11-29T14:02:11Z,gpu-017,mlx5_3,optics_rx_power_dbm
"""


def rows(conn):
    return conn.execute("SELECT ts, host, entity, metric, value FROM metrics ORDER BY ts").fetchall()


def test_csv_takes_iso_and_epoch_times_maps_names_and_reports_bad_lines(conn, tmp_path):
    path = tmp_path / "optics.csv"
    path.write_text(CSV)
    report = ingest_file(conn, path, IngestOptions())
    assert (report.status, report.format, report.rows, report.rejected) == ("loaded", "metrics_long", 4, 2)
    assert [(line, reason) for line, reason, _ in report.reject_samples] == [
        (6, "bad timestamp (ISO-8601 or epoch seconds)"),
        (7, "expected 5 fields, found 4"),
    ]
    assert rows(conn) == [
        (datetime(2026, 11, 18, 11, 6, 40), "gpu-017", "mlx5_3", "optics_rx_power_dbm", -8.1),
        (datetime(2026, 11, 29, 13, 2, 11), "leaf-02", "Ethernet21", "if_in_errors_total", 3.0),
        (datetime(2026, 11, 29, 14, 2, 11, 123000), "gpu-017", "mlx5_3", "optics_rx_power_dbm", -7.9),
        (datetime(2026, 11, 29, 15, 0), "gpu-017", "gpu2", "gpu_temp_celsius", 66.0),
    ]
    assert conn.execute("SELECT unit FROM metric_catalog WHERE metric = 'optics_rx_power_dbm'").fetchone() == ("dBm",)


def test_zone_less_times_are_read_in_the_given_timezone_and_columns_may_be_reordered(conn, tmp_path):
    path = tmp_path / "power.csv"
    path.write_text("host,metric,value,entity,timestamp\ngpu-001,gpu_power_watts,650,gpu0,2026-07-01 12:00:00\n")
    ingest_file(conn, path, IngestOptions(timezone="Europe/Paris"))
    assert rows(conn) == [(datetime(2026, 7, 1, 10, 0), "gpu-001", "gpu0", "gpu_power_watts", 650.0)]


def test_a_header_without_the_five_columns_is_not_taken_for_long_metrics():
    assert metrics_long.sniff("time,node,value\n1,a,2\n") == 0.0
    assert metrics_long.sniff("Timestamp,Host,Entity,Metric,Value,unit\n") > 0.5


def test_parquet_rows_load_with_typed_timestamps(conn, tmp_path):
    path = tmp_path / "optics.parquet"
    pq.write_table(
        pa.table(
            {
                "timestamp": pa.array(
                    [datetime(2026, 11, 29, 14, 0), datetime(2026, 11, 29, 14, 1)], pa.timestamp("ms", "UTC")
                ),
                "host": ["leaf-02", "leaf-02"],
                "entity": ["Ethernet21", "Ethernet21"],
                "metric": ["optics_rx_power_dbm", "optics_rx_power_dbm"],
                "value": [-3.5, -9.25],
            }
        ),
        path,
    )
    assert metrics_long.sniff(path.read_bytes()[:64].decode("latin-1")) > 0.5
    report = ingest_file(conn, path, IngestOptions())  # binary, yet not refused: Parquet is a format we read
    assert (report.status, report.format, report.rows, report.rejected) == ("loaded", "metrics_long", 2, 0)
    assert rows(conn) == [
        (datetime(2026, 11, 29, 14, 0), "leaf-02", "Ethernet21", "optics_rx_power_dbm", -3.5),
        (datetime(2026, 11, 29, 14, 1), "leaf-02", "Ethernet21", "optics_rx_power_dbm", -9.25),
    ]
