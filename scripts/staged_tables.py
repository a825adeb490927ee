"""Temp tables passed between modules by a name no signature shows (docs/architecture.md, "Staged tables").

For a git revision: the temp tables created under a literal name (`TEMP TABLE _name`) in signals/, explain/,
accounting/ and fleet/, and those of them whose name appears in another module than the one that creates
them (a .sql file counts as its own module).

    python scripts/staged_tables.py [REV]    # default HEAD
"""

from __future__ import annotations

import re
import subprocess
import sys

DIRS = ["synestra_cli/signals", "synestra_cli/explain", "synestra_cli/accounting", "synestra_cli/fleet"]


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], capture_output=True, text=True, check=True).stdout


def main() -> None:
    rev = sys.argv[1] if len(sys.argv) > 1 else "HEAD"
    files = [f for f in _git("ls-tree", "-r", "--name-only", rev, *DIRS).split() if f.endswith((".py", ".sql"))]
    text = {f: _git("show", f"{rev}:{f}") for f in files}
    created: dict[str, set[str]] = {}
    for f, t in text.items():
        for name in re.findall(r"TEMP (?:TABLE|VIEW) (_[a-z_]+)", t):
            created.setdefault(name, set()).add(f)
    crossing = {}
    for name, makers in created.items():
        named = sorted(f for f, t in text.items() if f not in makers and re.search(rf"(?<![\w.]){name}\b", t))
        if named:
            crossing[name] = named
    print(f"{rev}: {len(created)} temp tables created under a literal name; {len(crossing)} named in another module")
    for name, named in sorted(crossing.items()):
        print(f"  {name}: created in {', '.join(sorted(created[name]))}; named in {', '.join(named)}")


if __name__ == "__main__":
    main()
