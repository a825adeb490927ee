"""The format registry: every format module is found, each names the tables it writes truthfully, and
detection on the real corpus never rests on the tie order."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import pytest
import real_corpus

from synestra_cli import formats
from synestra_cli.formats.base import Format, IngestOptions
from synestra_cli.formats.reading import decode, read_head
from synestra_cli.ingest import ingest_file
from synestra_cli.store.sources import BOOKKEEPING_TABLES, sourced_tables

NAMES = [
    "dcgmi_diag",
    "deepspeed",
    "ethtool_stats",
    "flight_recorder",
    "fr_trace",
    "gnmic_event",
    "hf_trainer",
    "ib_counters",
    "ibnetdiscover",
    "ibswinfo",
    "kube_events_table",
    "kubernetes",
    "megatron",
    "metrics_long",
    "mlperf",
    "mlxlink",
    "nccl_inspector",
    "nemo",
    "nvidia_smi_csv",
    "nvidia_smi_q",
    "nvrx_log",
    "orbax_log",
    "prom_api_json",
    "prometheus",
    "sacct",
    "slurm_log",
    "sonic_counters",
    "sonic_fec_stats",
    "syslog",
    "topology_csv",
    "torch_log",
    "torchtitan",
]


def test_every_module_defining_a_format_is_registered_under_its_name():
    modules = [
        importlib.import_module(m.name) for m in pkgutil.walk_packages(formats.__path__, prefix="synestra_cli.formats.")
    ]
    defined = sorted(m.FORMAT.name for m in modules if isinstance(getattr(m, "FORMAT", None), Format))
    assert defined == sorted(formats.registry()) == NAMES
    job_logs = {f.name for f in formats.job_log_formats()}
    assert job_logs == {
        "deepspeed",
        "hf_trainer",
        "megatron",
        "mlperf",
        "nemo",
        "nvrx_log",
        "orbax_log",
        "torch_log",
        "torchtitan",
    }
    assert all(f.facts for f in formats.job_log_formats())


@pytest.mark.heavy
def test_a_format_writes_only_the_tables_it_names(conn):
    """Three real files of each format loaded in one store: the tables holding a source's rows are among
    its format's `writes` (metric_catalog is shared, without a source_id, so not checked here)."""
    by_format: dict[str, list[Path]] = {}
    for path in real_corpus.claimed_files():
        by_format.setdefault(real_corpus.expected_format(str(path.relative_to(real_corpus.DATA))), []).append(path)
    by_format.pop("unknown format", None)
    for paths in by_format.values():
        for path in paths[:3]:
            ingest_file(conn, path, IngestOptions(year=2025))
    seen: dict[str, set[str]] = {}
    for table in sourced_tables(conn):
        if table.name in BOOKKEEPING_TABLES:
            continue
        rows = conn.execute(
            f"SELECT DISTINCT s.format FROM {table.name} t JOIN sources s USING (source_id)"  # noqa: S608 - catalog name
        ).fetchall()
        for (fmt,) in rows:
            seen.setdefault(fmt, set()).add(table.name)
    assert set(seen) >= {"syslog", "sacct", "megatron", "mlperf", "prometheus", "ib_counters", "ibnetdiscover"}
    for name, tables in seen.items():
        assert tables <= formats.registry()[name].writes, name


# The central tie list formats/__init__.py held before each format declared its `priority` (issue 33):
# these first, in this order, then every other format by name.
OLD_TIE_ORDER = (
    "mlperf",
    "megatron",
    "nemo",
    "torchtitan",
    "deepspeed",
    "orbax_log",
    "nvrx_log",
    "torch_log",
    "syslog",
    "sacct",
    "ib_counters",
    "ethtool_stats",
    "mlxlink",
    "sonic_fec_stats",
    "gnmic_event",
    "topology_csv",
    "ibnetdiscover",
    "prometheus",
    "prom_api_json",
    "metrics_long",
)


def test_the_priorities_order_the_registry_as_the_old_tie_list_did():
    """Every format declares an int priority of its own (the field has no default), and sorting by it
    gives the order the central list gave: a tie between two sniffers goes where it went before."""
    registry = formats.registry()
    assert all(type(fmt.priority) is int for fmt in registry.values())
    rest = sorted(set(registry) - set(OLD_TIE_ORDER))
    assert list(registry) == [*OLD_TIE_ORDER, *rest]
    listed = [registry[name].priority for name in OLD_TIE_ORDER]
    assert listed == sorted(set(listed), reverse=True), "the listed formats: distinct, in that order"
    assert all(registry[name].priority < listed[-1] for name in rest)
    with pytest.raises(TypeError, match="priority"):
        Format("x", "a format without a priority", lambda head: 0.0, lambda ctx: None, frozenset())  # type: ignore[call-arg, arg-type, return-value]


def test_no_file_of_the_real_corpus_is_a_tie_between_two_formats():
    """The tie order is a safety net, never what picks a real file's format."""
    for path in real_corpus.claimed_files():
        head = decode(read_head(path))
        scores = sorted((fmt.sniff(head) for fmt in formats.registry().values()), reverse=True)
        assert scores[0] == 0.0 or scores[0] > scores[1], path


def test_detection_skipping_formats_that_cannot_win_picks_what_trying_every_one_would():
    """detect() skips a format whose `top` cannot beat the best score so far: each sniff stays at or
    under its top, and the answer on every file of the real corpus is the exhaustive argmax's."""
    registry = formats.registry()
    rank = {name: i for i, name in enumerate(registry)}
    files = real_corpus.claimed_files()
    assert files
    for path in files:
        head = decode(read_head(path))
        scores = {name: float(fmt.sniff(head)) for name, fmt in registry.items()}
        for name, score in scores.items():
            assert score <= registry[name].top, (path, name, score)
        best = max(scores.items(), key=lambda item: (item[1], -rank[item[0]]))
        if best[1] > 0:
            assert formats.detect(head).name == best[0], path


def test_a_sniffers_needles_never_change_its_score_on_the_real_corpus(monkeypatch):
    """joblog_sniff.has_line skips its regex when the head holds none of its needles (literals every match
    contains): each sniff scores every file of the real corpus as the regex alone would."""
    from synestra_cli.formats.training import joblog_sniff

    files = real_corpus.claimed_files()
    heads = [decode(read_head(path)) for path in files]
    registry = formats.registry()
    with_needles = [{name: fmt.sniff(head) for name, fmt in registry.items()} for head in heads]
    has_line = joblog_sniff.has_line
    monkeypatch.setattr(joblog_sniff, "has_line", lambda head, pattern, *needles: has_line(head, pattern))
    without = [{name: fmt.sniff(head) for name, fmt in registry.items()} for head in heads]
    assert sum(any(s.values()) for s in with_needles) > 20  # the corpus is sniffed, not skipped
    for path, a, b in zip(files, with_needles, without, strict=True):
        assert a == b, path
