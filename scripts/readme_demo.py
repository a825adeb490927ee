"""Regenerate the demo output in README.md and docs/explain.md from the commands themselves (never by hand).

    python scripts/readme_demo.py          # rewrite both files in place
    python scripts/readme_demo.py --check  # exit 1 if either is out of date

README: the synestra commands of the first set-up command (after `pip install -e . &&`) run in order on
a fresh store; their stderr then stdout go inside the `<details>` block, whose line count is updated.
docs/explain.md: the worked example's `$ synestra ...` line is run the same way. Paths under the
repository are printed relative to it, as a user running from the clone's root reads them.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
EXPLAIN_DOC = ROOT / "docs" / "explain.md"


def run(commands: list[str], db: Path) -> str:
    env = {**os.environ, "SYNESTRA_DB": str(db), "COLUMNS": "120"}
    out = []
    for cmd in commands:
        argv = shlex.split(cmd)
        exe = str(Path(sys.executable).with_name("synestra"))
        done = subprocess.run([exe, *argv[1:]], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
        out += [done.stderr, done.stdout]
    return "".join(out).replace(f"{ROOT}/", "")


def synestra_commands(line: str) -> list[str]:
    return [c.strip() for c in line.split("&&") if c.strip().startswith("synestra ")]


def readme(text: str, db: Path) -> str:
    first = next(ln for ln in text.splitlines() if ln.startswith("python3 -m venv") and "pip install -e . " in ln)
    output = run(synestra_commands(first), db).rstrip("\n")
    n = output.count("\n") + 1
    pattern = re.compile(r"<details><summary>the whole output \(\d+ lines\)</summary>\n\n```text\n.*?\n```", re.DOTALL)
    block = f"<details><summary>the whole output ({n} lines)</summary>\n\n```text\n{output}\n```"
    assert pattern.search(text), "README has no demo <details> block"
    return pattern.sub(lambda _: block, text, count=1)


def explain_doc(text: str, db: Path) -> str:
    pattern = re.compile(r"(## Worked example[^\n]*\n\n```\n\$ (synestra [^\n]*)\n).*?(\n```)", re.DOTALL)
    m = pattern.search(text)
    assert m, "docs/explain.md has no worked example"
    output = run(synestra_commands(m.group(2)), db)
    ingest = ("sample_data/", "total: ", "  note: ")  # the example shows explain's output, not ingest's
    shown = "\n".join(ln for ln in output.splitlines() if not ln.startswith(ingest))
    return text[: m.start()] + m.group(1) + shown + m.group(3) + text[m.end() :]


def main() -> int:
    check = "--check" in sys.argv[1:]
    stale = []
    for path, rewrite in ((README, readme), (EXPLAIN_DOC, explain_doc)):
        with tempfile.TemporaryDirectory() as tmp:
            old = path.read_text()
            new = rewrite(old, Path(tmp) / "demo.duckdb")
        if new != old:
            stale.append(path.name)
            if not check:
                path.write_text(new)
    print(("out of date: " if check else "rewritten: ") + (", ".join(stale) or "none"), file=sys.stderr)
    return 1 if check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
