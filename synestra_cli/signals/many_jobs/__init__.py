"""The read of many jobs at once (tax-report, fleet, `explain --all`; explain's one way to read a job's
telemetry on the series layout): each module is the many-jobs form of the single-job detector it is
named after in signals/ (events, candidates, anomalies), with `tables` loading what is asked and
`telemetry` running the read. docs/architecture.md, "One reading path"."""
