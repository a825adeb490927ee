"""Prometheus text exposition conformance: the Prometheus project's own parser cases, every .prom sample against
prometheus_client's parser as an oracle (same series, same values), and property-based round trips."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pytest
from conftest import REAL_SAMPLES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from synestra_cli.formats import detect
from synestra_cli.formats.base import IngestOptions, LoadContext
from synestra_cli.formats.telemetry import prom_text

PROM = REAL_SAMPLES / "prometheus"
EXPFMT_CASES = sorted(PROM.glob("prometheus-common_expfmt-*.prom"))
ALL_SAMPLES = sorted(REAL_SAMPLES.rglob("*.prom"))
# The vendor README elides lines with "..." (lines 7 and 11): not exposition lines, and the oracle agrees.
ELIDED = {"dcgm-exporter_README_metrics_blank-sentinel.prom": [7, 11]}

Sample = tuple[str, tuple[tuple[str, str], ...], float | str, int | None]  # name, labels, value, ts (ms)


def _value(v: float) -> float | str:
    return "NaN" if math.isnan(v) else v


_CONN: list[duckdb.DuckDBPyConnection] = []


def _conn() -> duckdb.DuckDBPyConnection:
    """One plain in-memory connection for the module: the parser needs only its temp tables (no store)."""
    if not _CONN:
        _CONN.append(duckdb.connect())
    return _CONN[0]


def ours(path: Path) -> tuple[list[Sample], list[int]]:
    """What Synestra's text parser reads from the file (before any catalog mapping), and its rejected lines."""
    conn = _conn()
    ctx = LoadContext(conn, 1, path, path.name, IngestOptions(), datetime(2026, 1, 1))
    try:
        result = prom_text.numbered_path(ctx)
        rows = conn.execute("""
            SELECT s.name, map_entries(s.labels), r.value, epoch_ms(r.ts)
            FROM prom_rows r JOIN prom_series s USING (sid) WHERE r.reason IS NULL ORDER BY r.lineno""").fetchall()
    finally:
        prom_text.drop_staged(conn)
    got = [(n, tuple(sorted((e["key"], e["value"]) for e in labels)), _value(v), ms) for n, labels, v, ms in rows]
    return got, [line for line, _, _ in result.reject_samples]


def oracle(text: str) -> list[Sample]:
    """prometheus_client's reading of the same text (its timestamps are seconds; it names a counter's samples
    `<family>_total` whatever the line says, so the name is compared without that suffix)."""
    out = []
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            ts = None if s.timestamp is None else round(float(s.timestamp) * 1000)
            out.append((_untotal(s.name), tuple(sorted(s.labels.items())), _value(float(s.value)), ts))
    return out


def _untotal(name: str) -> str:
    return name.removesuffix("_total")


def untotalled(samples: list[Sample]) -> list[Sample]:
    return sorted(((_untotal(n), labels, v, ts) for n, labels, v, ts in samples), key=repr)


def without_lines(path: Path, skip: list[int]) -> str:
    return "".join(ln for i, ln in enumerate(path.read_text().splitlines(True), start=1) if i not in skip)


@pytest.mark.parametrize("path", ALL_SAMPLES, ids=lambda p: p.name)
def test_every_sample_reads_as_prometheus_client_reads_it(path):
    got, rejects = ours(path)
    assert rejects == ELIDED.get(path.name, [])
    assert untotalled(got) == untotalled(oracle(without_lines(path, rejects)))


@pytest.mark.parametrize("path", EXPFMT_CASES, ids=lambda p: p.name)
def test_prometheus_parser_cases_are_recognised_and_have_no_rejects(path):
    assert detect(path.read_text()).name == "prometheus"
    got, rejects = ours(path)
    assert rejects == [] and got


def test_blanks_tabs_and_escapes_of_the_whitespace_case():
    got, _ = ours(PROM / "prometheus-common_expfmt-case2_whitespace-escapes.prom")
    assert got == [
        ("name", (("basename", "basevalue"), ("labelname", "val1")), "NaN", None),
        # a blank before `{`; \" \\ \n unescaped
        ("name", (("basename", 'base"v\\al\nue'), ("labelname", "val2")), 0.23, 1234567890),
        # TABs and blanks around `,` and `=`
        ("name2", (("basename", "basevalue2"), ("labelname", "val2")), math.inf, 54321),
        # a trailing comma, and no blank between `}` and the value
        ("name2", (("labelname", "val1"),), -math.inf, None),
    ]


def test_summary_case_keeps_leading_blank_lines_negative_timestamps_and_leading_zeros():
    got, _ = ours(PROM / "prometheus-common_expfmt-case3_summary.prom")
    assert ("decoy", (), -1.0, -2) in got
    assert ("my_summary_sum", (("n1", "val2"),), 8.0, 15) in got  # `08`
    assert got[-1] == ("my_summary", (("n1", "val1"), ("n2", "val2"), ("quantile", "-12.34")), "NaN", None)


# --- property-based: any valid exposition line, with any legal blanks, reads back as written ----------------

NAMES = st.from_regex(r"[a-zA-Z_:][a-zA-Z0-9_:]{0,12}", fullmatch=True)
LABEL_NAMES = st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_]{0,8}", fullmatch=True).filter(lambda n: not n.startswith("__"))
LABEL_VALUES = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
BLANKS = st.sampled_from([" ", "\t", "  ", " \t"])
OPT_BLANKS = st.sampled_from(["", " ", "\t"])
VALUES = st.one_of(st.floats(allow_nan=False, width=64), st.integers(-(10**12), 10**12).map(float))


def escape(v: str) -> str:
    return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


@st.composite
def exposition_line(draw) -> tuple[str, Sample]:
    name = draw(NAMES)
    labels = draw(st.dictionaries(LABEL_NAMES, LABEL_VALUES, max_size=4))
    value = draw(VALUES)
    ts = draw(st.one_of(st.none(), st.integers(0, 4 * 10**12)))
    lead = draw(OPT_BLANKS)
    if labels:
        inner = ",".join(
            f'{draw(OPT_BLANKS)}{k}{draw(OPT_BLANKS)}={draw(OPT_BLANKS)}"{escape(v)}"' for k, v in labels.items()
        )
        if draw(st.booleans()):
            inner += ","
        series = f"{name}{draw(OPT_BLANKS)}{{{inner}{draw(OPT_BLANKS)}}}"
        sep = draw(OPT_BLANKS)  # after `}` the blank is optional
    else:
        series, sep = name, draw(BLANKS)
    text_value = repr(value) if math.isfinite(value) else ("+Inf" if value > 0 else "-Inf")
    line = f"{lead}{series}{sep}{text_value}"
    if ts is not None:
        line += f"{draw(BLANKS)}{ts}"
    return line + draw(OPT_BLANKS), (name, tuple(sorted(labels.items())), value, ts)


@pytest.mark.heavy
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(exposition_line(), min_size=1, max_size=8))
def test_any_valid_line_reads_back_as_written(tmp_path, lines):
    path = tmp_path / "scrape.prom"
    path.write_text("\n".join(line for line, _ in lines) + "\n", encoding="utf-8")
    got, rejects = ours(path)
    assert rejects == []
    assert got == [want for _, want in lines]


@pytest.mark.heavy
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(exposition_line(), min_size=1, max_size=6))
def test_the_oracle_agrees_on_generated_lines(tmp_path, lines):
    path = tmp_path / "scrape.prom"
    text = "\n".join(line for line, _ in lines) + "\n"
    path.write_text(text, encoding="utf-8")
    got, _ = ours(path)
    assert untotalled(got) == untotalled(oracle(text))


def test_timestamps_are_milliseconds_since_the_epoch():
    got, _ = ours(PROM / "prometheus-common_expfmt-case1_minimal.prom")
    (ms,) = [ts for name, _, _, ts in got if name == "another_metric"]
    assert datetime.fromtimestamp(ms / 1000, UTC) == datetime(1970, 1, 1, 0, 1, 43, 948000, tzinfo=UTC)
