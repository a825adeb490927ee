"""The picture looked at, not only its spec (issue 34): the PNG vl-convert writes, and the HTML page as
headless Chromium draws it, checked pixel by pixel for the headline and the tax buckets' bands."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import copy_sample_store
from pngpixels import columns_of, pixels, widest_row

from synestra_cli.cli.main import cli
from synestra_cli.cli.timeline_chart import BAND_COLOURS, HEADLINE_COLOUR, PHASE_COLOURS

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import timeline_browser  # noqa: E402


def rgb(hex_colour: str) -> tuple[int, int, int]:
    return tuple(int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))  # type: ignore[return-value]


@pytest.fixture(scope="module")
def db(tmp_path_factory, sample_store_template) -> str:
    return str(copy_sample_store(sample_store_template, tmp_path_factory.mktemp("pixels")))


def draw(db: str, out: Path) -> None:
    res = CliRunner().invoke(cli, ["timeline", "--job", "1003", "-o", str(out), "--db", db])
    assert res.exit_code == 0, res.output


def check(rows: list[bytes], width: int) -> dict[str, list[int]]:
    top = len(rows) // 12
    assert len(columns_of(rows, rgb(HEADLINE_COLOUR), 0, top)) > 200  # the title and headline, in their colour
    found = {name: widest_row(rows, rgb(c)) for name, c in BAND_COLOURS.items()}
    missing = [n for n, xs in found.items() if not xs]
    assert not missing, missing  # job 1003 has every bucket: saves, a restore, start-ups, lost work, hang, requeue
    # in time order: the work lost before the GPU fell off, then the hang, then the requeue
    assert max(found["lost work"]) <= min(found["hang"]) + 2 and max(found["hang"]) <= min(found["requeue"]) + 2
    # the restart's own strip: its detection (the fault until the job noticed, 10 min) drawn as a bar,
    # wider than its legend's swatch; its stopping (3 s) at least in the legend
    detection = widest_row(rows, rgb(PHASE_COLOURS["detection"]))
    assert len(detection) > 14 * width // 1400, detection  # a legend swatch is ~10 px
    assert widest_row(rows, rgb(PHASE_COLOURS["stopping"]))
    return found


@pytest.mark.heavy
def test_the_png_shows_the_headline_and_every_tax_bucket(db, tmp_path):
    out = tmp_path / "t.png"
    draw(db, out)
    width, _, rows = pixels(out.read_bytes())
    assert width >= 2400  # 1400 px at scale 2
    check(rows, width)


@pytest.mark.heavy
@pytest.mark.skipif(timeline_browser.chromium() is None, reason="no Chromium (.ci/run installs Debian's)")
def test_the_html_page_in_chromium_fills_the_window_with_the_headline_and_the_bands(db, tmp_path):
    page, shot = tmp_path / "t.html", tmp_path / "shot.png"
    draw(db, page)
    browser = timeline_browser.chromium()
    assert browser
    timeline_browser.screenshot(browser, page, shot, size="1400,1000")
    width, _, rows = pixels(shot.read_bytes())
    found = check(rows, width)
    assert max(found["save"]) > 0.9 * width  # the last saves reach the right edge: full width, not 1000 px


def test_the_png_reader_reads_a_png_vl_convert_writes():
    import vl_convert as vlc

    spec = {"data": {"values": [{"x": 0}]}, "mark": {"type": "rect", "color": "#1e88e5"}, "width": 20, "height": 10}
    width, height, rows = pixels(bytes(vlc.vegalite_to_png(spec)))
    assert width > 20 and height > 10 and columns_of(rows, (0x1E, 0x88, 0xE5))
    subprocess.run(["true"], check=True)
