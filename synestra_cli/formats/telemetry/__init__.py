"""GPU and node telemetry: Prometheus scrapes and API answers, long-form metric exports, nvidia-smi, dcgmi diag."""
