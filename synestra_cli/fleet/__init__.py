"""The fleet across jobs: which components keep costing jobs (lemons.py) and which are degrading now,
before they cost a checkpoint (risks.py). Both speak of assets (assets.py): a GPU by its UUID, a NIC by
the switch port at its far end, a rack, a filesystem server, a host."""
