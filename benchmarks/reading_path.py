"""One job's telemetry read two ways, in CPU seconds: the single-job read (signals/scope_samples.py
`build_scope`, signals/anomalies.py `anomalies`, signals/events.py `typed_events`) against the fleet's read
for a one-job list (signals/fleet_telemetry.py `fleet_telemetry`), the same job and read windows (its
explanation's, or its whole span when nothing of it needs a cause). Each run is a new process; the
answer's digest shows both read the same anomalies and events. docs/architecture.md, "One reading path".

    python benchmarks/reading_path.py STORE JOB [--runs 3]
"""

from __future__ import annotations

import argparse
import subprocess
import sys

CHILD = """
import hashlib, resource, sys
from synestra_cli.explain.inputs import comparable, job_inputs
from synestra_cli.explain.job import event_read, telemetry_windows
from synestra_cli.signals.anomalies import anomalies
from synestra_cli.signals.events import typed_events
from synestra_cli.signals.fleet_tables import JobRead
from synestra_cli.signals.fleet_telemetry import fleet_telemetry
from synestra_cli.signals.scope_samples import stage_scope
from synestra_cli.store import open_store

def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime

db, job, way = sys.argv[1:4]
with open_store(db, read_only=True) as conn:
    inputs = job_inputs(conn, job)
    spans = telemetry_windows(conn, inputs) or [(inputs.scope.start, inputs.scope.end)]
    read = event_read(inputs.scope, spans)
    c0 = cpu()
    if way == "single":
        staged = stage_scope(conn, inputs.scope, spans)
        idle = comparable(inputs)
        found = anomalies(conn, windows=spans, comparable=idle, samples=staged.samples, rules=staged.rules)
        events = typed_events(conn, *read)
    else:
        t = fleet_telemetry(conn, {job: JobRead(inputs.scope, spans, read, comparable(inputs))})[job]
        found, events = (t.anomalies if t.windows == spans else None), t.events
    c1 = cpu()
digest = hashlib.sha1(repr((sorted(map(repr, found or [])), sorted(map(repr, events)))).encode()).hexdigest()[:10]
n = -1 if found is None else len(found)
print(f"{c1 - c0:.3f} {len(spans)} {len(inputs.scope.hosts)} {n} {len(events)} {digest}")
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store")
    ap.add_argument("job")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    for way in ("single", "fleet"):
        cpu, answers = [], set()
        for _ in range(args.runs):
            out = subprocess.run(
                [sys.executable, "-c", CHILD, args.store, args.job, way], capture_output=True, text=True
            )
            if out.returncode:
                sys.exit(out.stderr)
            seconds, windows, hosts, found, events, digest = out.stdout.split()
            cpu.append(float(seconds))
            answers.add(digest)
        # found -1: the fleet's read left the job out (its sources are not all summarised: explain reads it alone)
        print(
            f"{way:6} CPU s {', '.join(f'{c:.3f}' for c in cpu)}  windows {windows} hosts {hosts} "
            f"anomalies {found} events {events} answer {'/'.join(sorted(answers))}"
        )


if __name__ == "__main__":
    main()
