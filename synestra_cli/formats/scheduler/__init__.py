"""What the scheduler recorded: Slurm's sacct and daemon logs, Kubernetes objects and events."""
