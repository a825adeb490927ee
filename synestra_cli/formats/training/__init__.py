"""Training jobs' own output: the job-log formats of each trainer, their shared machinery, and the
collective-communication dumps (Flight Recorder, NCCL Inspector)."""
