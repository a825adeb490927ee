"""Fuzz: random and mutated lines of every format fed to ingest (issue 18), also inside the envelopes a
paste or a collector puts around them (issue 35: a prompt, a quote, an indentation, a per-line prefix,
lines cut at a terminal's width).

Seeds are real samples (tests/data, with their provenance) of each format family; hypothesis deletes,
repeats, truncates and corrupts their lines, or writes random text and bytes. Whatever comes in:
- no exception escapes ingest;
- a failed file leaves the store exactly as it was; a loaded one is recorded in `sources`, and no table
  holds a row of a source that is not there (the store holds only whole files);
- every failure and every rejected line is reported (an error; reject samples with their reasons).
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from conftest import REAL_SAMPLES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from synestra_cli.formats import envelope, envelope_sql
from synestra_cli.formats.base import IngestOptions
from synestra_cli.formats.reading import lines_to_table
from synestra_cli.ingest import ingest_paths
from synestra_cli.store import open_store
from synestra_cli.store.sources import sourced_tables

SAMPLE_DATA = Path(__file__).resolve().parent.parent / "sample_data" / "exports"
SEEDS = {
    "syslog_rfc3164": REAL_SAMPLES / "syslog" / "gh-gpu-operator-1146_rfc3164_xid48_xid64.log",
    "dmesg": REAL_SAMPLES / "syslog" / "gh-gpu-burn-1_dmesg_aer-fatal_then_xid79.log",
    "journal": REAL_SAMPLES / "syslog" / "gh-cubecos-733_journal_mlx5e-link-up-flap.log",
    "sacct": REAL_SAMPLES / "training" / "tdhock-slurm_sacct-P-tab_oom.txt",
    "megatron": REAL_SAMPLES / "training" / "gh-megatron-lm-756_iteration-lines_ts-seconds.log",
    "torchtitan": REAL_SAMPLES / "training" / "gh-torchtitan-pr1287_steps_and_checkpoint_async.log",
    "nccl_watchdog": REAL_SAMPLES / "training" / "gh-llamafactory-6269_nccl-watchdog-timeout_reduce-scatter.log",
    "dcgm_prom": REAL_SAMPLES / "dcgm" / "gh-dcgm-exporter-512_metrics_h100-mig.prom",
    "promtool_dump": REAL_SAMPLES / "dcgm" / "prometheus_promtool_tsdb-dump_golden.txt",
    "prom_api": REAL_SAMPLES / "dcgm" / "prometheus_docs_api_query_range_example.json",
    "gnmic": REAL_SAMPLES / "fabric" / "gh-gnmic-613_event-format_psu.json",
    "perfquery": REAL_SAMPLES / "fabric" / "gh-infiniband-diags-16_perfquery-x_rhel75.txt",
    "ethtool": REAL_SAMPLES / "fabric" / "gh-ethq-8_ethtool-S_mlx5_connectx4_head.txt",
    "mlxlink": REAL_SAMPLES / "fabric" / "gh-sonic-265_mlxlink_operational-info_25GbE.txt",
    "sonic_fec": REAL_SAMPLES / "fabric" / "gh-sonic-swss-3757_show-interfaces-counters-fec-stats.txt",
    "ibnetdiscover": REAL_SAMPLES / "fabric" / "rdma-core_man_ibnetdiscover_topology-example.txt",
    "topology_csv": SAMPLE_DATA / "topology.csv",
    "ghes": REAL_SAMPLES / "syslog" / "lkml-2020-06-amd-pci-bridge_rfc3164_ghes-pcie-corrected.log",
    "ethtool_queues": REAL_SAMPLES / "fabric" / "gh-ethq-15_prompt-ethtool-i-and-S_ena-queue-N.txt",
    "wrapped_watchdog": REAL_SAMPLES / "training" / "gh-open-r1-620_watchdog_wrapped-at-terminal-width.log",
    "nvidia_smi_q": REAL_SAMPLES / "nvidia" / "gpud_nvidia-smi-q_535.129.03_a10_row-remap-pending.txt",
    "nvidia_smi_csv": REAL_SAMPLES / "nvidia" / "aau-aicloud-docs_nvidia-smi-query-gpu_csv_units.txt",
    "dcgmi_diag": REAL_SAMPLES / "nvidia" / "gh-go-dcgm-52_dcgmi-diag-r2_3.3.1_gpu-memory-fail_fragment.txt",
    "dcgmi_diag_json": REAL_SAMPLES / "nvidia" / "dcgm-testing_TestDiagManagerStrings_per-gpu-json_3.x.json",
    "slurm_log": REAL_SAMPLES / "slurm" / "gh-aws-parallelcluster-5670_slurmctld_requeue-node-failure_power-save.log",
    "sonic_counters": REAL_SAMPLES / "fabric" / "sonic-utilities_command-reference_show-interfaces-counters.txt",
    "ibswinfo": REAL_SAMPLES / "fabric" / "stanford-rc-ibswinfo_readme_default-output_qm8790.txt",
    "perfquery_e": REAL_SAMPLES / "fabric" / "treydock-infiniband_exporter_perfquery-E_lid2052-port1.txt",
    "nccl_inspector": REAL_SAMPLES / "collectives" / "nccl-inspector_readme-2.28.1_coll-perf_allreduce.json",
    "fr_pickle": REAL_SAMPLES / "collectives" / "nvrx-fr-dumps_gpu_error_1st" / "_dump_12",
    "fr_trace": REAL_SAMPLES / "collectives" / "pytorch-tutorials_flight-recorder_torchfrtrace-missing-rank.txt",
    "nvrx": REAL_SAMPLES / "training" / "nemo-docs-resiliency_nvrx-straggler-report_512-ranks.log",
}
SEED_LINES = {name: path.read_bytes().splitlines(keepends=True)[:60] for name, path in SEEDS.items()}

NOISE = st.one_of(
    st.binary(max_size=80),
    st.text(max_size=80).map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.sampled_from(
        [
            b"",
            b"\n",
            b"\x00\x00",
            b"\xef\xbb\xbf",
            b"\xff\xfe",
            b"null",
            b"[[[[",
            b"}",
            b"-1e400",
            b"nan",
            b"9" * 40,
            b"0000-01-01T00:00:00Z",
            b"|||||",
            b"\t\t",
            b"\r\n",
            b"\x1b[2J",
        ]
    ),
)
MUTATION = st.tuples(
    st.sampled_from(["delete", "repeat", "truncate", "replace", "insert", "swap"]),
    st.integers(min_value=0, max_value=10_000),
    NOISE,
)


def _mutate(lines: list[bytes], mutations: list[tuple[str, int, bytes]]) -> bytes:
    lines = list(lines)
    for op, at, noise in mutations:
        if not lines:
            lines.append(noise)
            continue
        i = at % len(lines)
        if op == "delete":
            del lines[i]
        elif op == "repeat":
            lines.insert(i, lines[i])
        elif op == "truncate":
            lines[i] = lines[i][: at % (len(lines[i]) + 1)]
        elif op == "replace":
            lines[i] = noise + b"\n"
        elif op == "insert":
            lines[i] = lines[i][: at % (len(lines[i]) + 1)] + noise + lines[i][at % (len(lines[i]) + 1) :]
        else:
            j = (at // 7) % len(lines)
            lines[i], lines[j] = lines[j], lines[i]
    return b"".join(lines)


# Envelopes as the tools that add them write them (formats/envelope.py cites each): (prompt, per-line prefix).
ENVELOPES = st.sampled_from(
    [
        (b"", lambda i: b""),
        (b"$ cat /var/log/x\n", lambda i: b""),
        (b"root@gpu-node-7:~# dmesg -T\n", lambda i: b""),
        (b"", lambda i: b"    "),
        (b"", lambda i: b"> "),
        (b"", lambda i: b"%3d: " % (i % 16)),
        (b"", lambda i: b"gpu-00%d: " % (i % 3)),
        (b"", lambda i: b"[gpu-001]: "),
        (b"", lambda i: b"stderr: "),
        (b"", lambda i: b"[1,%d]<stdout>:" % (i % 4)),
        (b"", lambda i: b"2024-05-01T10:00:%02d.123456789Z " % (i % 60)),
        (b"", lambda i: b"2024-05-01T10:00:%02d.123456789+00:00 stdout %s " % (i % 60, b"PF"[i % 2 : i % 2 + 1])),
    ]
)


def _wrap(data: bytes, env: tuple, width: int | None, docker: bool) -> bytes:
    """The mutated text as it reached a user: behind a prompt, each line prefixed, cut at `width`, or each
    line a docker json-file object."""
    prompt, prefix = env
    lines = data.splitlines()
    if width:
        lines = [line[k : k + width] for line in lines for k in range(0, max(len(line), 1), width)]
    if docker:
        logs = [
            {"log": line.decode("utf-8", "replace") + "\n", "stream": "stderr", "time": "2024-05-01T10:00:00Z"}
            for line in lines
        ]
        return "".join(json.dumps(log, separators=(",", ":")) + "\n" for log in logs).encode()
    return prompt + b"".join(prefix(i) + line + b"\n" for i, line in enumerate(lines))


def _counts(c) -> dict[str, int]:
    return {t.name: c.execute(f'SELECT count(*) FROM "{t.name}"').fetchone()[0] for t in sourced_tables(c)}


def _orphans(c) -> int:
    union = " UNION ".join(f'SELECT DISTINCT source_id FROM "{t.name}"' for t in sourced_tables(c))
    return c.execute(
        f"SELECT count(*) FROM ({union}) WHERE source_id NOT IN (SELECT source_id FROM sources)"
    ).fetchone()[0]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("fuzz") / "store.duckdb"
    with open_store(path) as conn:
        yield conn, path.parent


@pytest.mark.heavy
@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(
    seed=st.sampled_from(sorted(SEEDS)),
    mutations=st.lists(MUTATION, max_size=8),
    random_only=st.booleans(),
    options=st.sampled_from(
        [
            IngestOptions(),
            IngestOptions(year=2026),
            IngestOptions(timezone="Europe/Paris"),
            IngestOptions(host="gpu-017", job_id="1003"),
        ]
    ),
)
def test_mutated_inputs_never_escape_never_leave_partial_files_and_are_reported(
    store, seed, mutations, random_only, options
):
    conn, folder = store
    data = b"".join(m[2] + b"\n" for m in mutations) if random_only else _mutate(SEED_LINES[seed], mutations)
    f = folder / SEEDS[seed].name  # one path per seed: later examples grow or replace earlier ones
    f.write_bytes(data)
    before = _counts(conn)
    (report,) = ingest_paths(conn, [f], options)  # must not raise
    assert report.status in ("loaded", "skipped", "failed")
    if report.status == "failed":
        assert report.error and str(f) in report.error
        assert _counts(conn) == before  # rolled back whole, old source included
    if report.status == "loaded":
        assert conn.execute("SELECT count(*) FROM sources WHERE source_id = ?", [report.source_id]).fetchone()[0]
        assert not report.rejected or report.reject_samples  # rejected lines come with line and reason
    assert _orphans(conn) == 0


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(
    seed=st.sampled_from(sorted(SEEDS)),
    mutations=st.lists(MUTATION, max_size=4),
    env=ENVELOPES,
    width=st.sampled_from([None, None, 61, 80, 137]),
    docker=st.booleans(),
)
def test_enveloped_inputs_never_escape_and_keep_every_line_number(store, seed, mutations, env, width, docker):
    conn, folder = store
    data = _wrap(_mutate(SEED_LINES[seed], mutations), env, width, docker)
    f = folder / f"enveloped-{SEEDS[seed].name}"
    f.write_bytes(data)
    before = _counts(conn)
    (report,) = ingest_paths(conn, [f], IngestOptions(year=2025))  # must not raise
    assert report.status in ("loaded", "skipped", "failed")
    if report.status == "failed":
        assert report.error and str(f) in report.error
        assert _counts(conn) == before
    assert _orphans(conn) == 0
    # the normalised text has exactly the user's lines, each at its own number
    text = data.decode("utf-8", "replace")
    found = envelope.detect(text)
    if found is not None:
        table = lines_to_table(text, 1)
        out = envelope_sql.normalise(duckdb.connect(), table, found)
        assert out.column("lineno").to_pylist() == table.column("lineno").to_pylist()
