"""Give each cause of a reasoning its assets and its action (the runbook answer, issue 15)."""

from __future__ import annotations

from dataclasses import replace

from synestra_cli.explain.actions import action_for
from synestra_cli.explain.assets import AssetBook, assets_of
from synestra_cli.explain.chain import ChainLink
from synestra_cli.explain.evidence import Cause, Reasoning

SIGNAL_LAYERS = ("physical", "link", "traffic", "gpu")


def _entities(links: list[ChainLink]) -> list[tuple[str, str | None]]:
    return [(lk.host, lk.entity) for lk in links if lk.layer in SIGNAL_LAYERS and lk.host]


def identified(c: Cause, book: AssetBook, links: list[ChainLink]) -> Cause:
    """The cause with its assets and action; `links`: its own chain (empty for an alternative)."""
    assets = assets_of(c.category, c.host, c.component, book, _entities(links))
    action = action_for(c.category, c.host, c.component, assets, links, c.reported_healthy, c.first_signal)
    return replace(c, assets=tuple(assets), action=action)


def enrich(r: Reasoning, book: AssetBook) -> Reasoning:
    if r.cause is None:
        return r
    alternatives = [identified(a, book, list(a.evidence)) for a in r.alternatives]
    return Reasoning(identified(r.cause, book, r.chain), alternatives, r.chain)
