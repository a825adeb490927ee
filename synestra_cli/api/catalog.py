"""What Synestra knows how to read and to simulate: `formats()` (the input formats, for `synestra formats`
and `ingest --input-format`), and the simulator's scenarios, trainers, launchers and schedulers with
`simulate` (`synestra simulate`)."""

from __future__ import annotations

from synestra_cli.simulate.model import LAUNCHERS, TRAINERS
from synestra_cli.simulate.scenarios import MIN_NODES, SCENARIOS, SCHEDULERS, simulate

__all__ = ["LAUNCHERS", "MIN_NODES", "SCENARIOS", "SCHEDULERS", "TRAINERS", "FORMATS_SCHEMA", "formats", "simulate"]

FORMATS_SCHEMA = "synestra.formats/1"


def formats() -> dict[str, str]:
    """Every input format's name and description, by name."""
    from synestra_cli.formats import all_formats

    return {name: f.description for name, f in sorted(all_formats().items())}
