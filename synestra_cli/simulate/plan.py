"""A scenario's plan: the cluster, the window, the jobs and the faults that the builders (scenarios.py,
subtle.py) place, drawn from one random generator."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from synestra_cli.simulate import faults as F
from synestra_cli.simulate.cluster import Cluster
from synestra_cli.simulate.model import AS_USUAL, JobSpec, Rendering


@dataclass
class Plan:
    cl: Cluster
    t0: float
    t1: float
    rng: np.random.Generator
    jobs: list[JobSpec] = field(default_factory=list)
    faults: list[F.Fault] = field(default_factory=list)
    render: Rendering = AS_USUAL  # how the exports tell it (the variants: docs/simulator.md)

    def at(self, lo: float, hi: float) -> float:
        """A time between fractions lo and hi of the window, on a whole second."""
        return float(round(self.t0 + self.rng.uniform(lo, hi) * (self.t1 - self.t0)))

    def gpu(self) -> int:
        """A random GPU (or NIC: one per GPU) index."""
        return int(self.rng.integers(self.cl.gpus_per_node))

    def pick(self, seq):
        return seq[int(self.rng.integers(len(seq)))]

    def job(
        self, job_id: str, hosts: tuple[str, ...], start: float, end: float, name: str = "gpt3-175b-pretrain", **kw
    ) -> JobSpec:
        step_s = float(self.rng.uniform(6.0, 9.0))
        save_every = int(self.rng.choice([150, 200, 250]))
        spec = JobSpec(
            job_id=job_id,
            name=name,
            user=str(self.pick(("alice", "bob", "chen", "dana"))),
            hosts=hosts,
            gpus_per_node=self.cl.gpus_per_node,
            submit=F.dt(start - 45.0),
            start=F.dt(start),
            train_iters=int((end - start - 1200.0) / step_s * 0.9),
            time_limit_s=end - start + 7200.0,
            step_s=step_s,
            save_every=save_every,
            save_s=float(self.rng.uniform(25, 45)),
            restore_s=float(self.rng.uniform(40, 70)),
            startup_s=float(self.rng.uniform(90, 150)),
            requeue_s=900.0,
            log_interval=10,
        )
        return replace(spec, **kw)

    @property
    def main(self) -> JobSpec:
        return self.jobs[0]

    def outside(self) -> tuple[str, ...]:
        """Hosts no job of the plan uses (idle), else those outside the main job."""
        used = {h for j in self.jobs for h in j.hosts}
        idle = tuple(h for h in self.cl.hosts if h not in used)
        return idle or tuple(h for h in self.cl.hosts if h not in self.main.hosts)
