"""The real corpus in tests/data, scored as a new user meets it: is each file recognised without --format, and are
the facts a correct reader must extract right (values, times with year and zone, hosts, codes, ranks)?

    python tests/real_corpus.py        # prints the two counts and every miss
    pytest tests/test_real_corpus.py   # the same, as assertions
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
S = DATA / "real_samples"

# Files the project does not claim to read, and why (not counted).
UNCLAIMED = {
    "real_data/loghub-2k/BGL/BGL_2k.log": "BlueGene/L RAS log: not a format Synestra reads",
    "real_data/loghub-2k/HPC/HPC_2k.log": "loghub HPC event table: not a format Synestra reads",
    "real_samples/dcgm/gh-dcgm-235_promql-result_xid-errors-err_code.txt": "a PromQL answer pasted as text: refused",
    "real_samples/fabric/gh-telegraf-12831_gnmi-proto_transceiver-output-power_decimal_val.txt": (
        "a fragment of gNMI protobuf text: not a whole export"
    ),
    "real_samples/envelopes/gh-cri-o-3181_root-prompt_cri-log-stderr-F.log": (
        "a CRI container log of an oauth proxy: the envelope is read, the content is no format of Synestra's"
    ),
    "real_samples/training/gh-saforem2-mmm-docs_markdown-indented-6_rank-traceback_mpiexec.log": (
        "a plain Python traceback: refused, naming torch_log"
    ),
}

# Expected format of every claimed file, by folder (prefix) then by name.
BY_PREFIX = [
    ("real_samples/syslog/", "syslog"),
    ("real_data/loghub-2k/", "syslog"),
    ("real_data/mlperf", "mlperf"),
    ("real_samples/dcgm/", "prometheus"),
    ("real_samples/prometheus/", "prometheus"),
    ("real_samples/training/sacct_", "sacct"),
    ("real_samples/training/tdhock-slurm_sacct", "sacct"),
    ("real_samples/kubernetes/events-table", "kube_events_table"),
    ("real_samples/kubernetes/", "kubernetes"),
    ("real_samples/slurm/", "slurm_log"),
]
BY_NAME = {
    "ceems-jobstats_sacct-P_cluster-column.txt": "sacct",
    "prometheus_docs_api_query_range_example.json": "prom_api_json",
    "gh-ethq-8_ethtool-S_mlx5_connectx4_head.txt": "ethtool_stats",
    "gh-ethq-6_ethtool-S_bnx2x-per-queue.txt": "ethtool_stats",
    "gh-netutils-linux-208_ethtool-S_be2net-rxq-prefixed.txt": "ethtool_stats",
    "gh-ethq-15_prompt-ethtool-i-and-S_ena-queue-N.txt": "ethtool_stats",
    "gh-netdata-17015_prompt-ethtool-S_virtio-rx-queue-N.txt": "ethtool_stats",
    "gh-ethq-19_user-host-prompt_ethtool-S_sfc.txt": "ethtool_stats",
    "gh-ethq-20_ethtool-S-grep-xdp_mlx5-rx0-queue.txt": "ethtool_stats",
    "gh-gnmic-613_event-format_psu.json": "gnmic_event",
    "gh-infiniband-diags-16_perfquery-x_rhel75.txt": "ib_counters",
    "gh-netdata-2620_perfquery-x_nonzero-data.txt": "ib_counters",
    "gh-ucx-9590_ibqueryerrors-port-ALL.txt": "ib_counters",
    "gpud_sys-class-infiniband_h100_snapshot.txt": "ib_counters",
    "gh-rdma-core-pr847_ibstat_mlx4-2port_verbose.txt": "ib_counters",
    "gh-l2fwd-nv-6_ibstat_cx6dx-roce.txt": "ib_counters",
    "gh-lshca-11_mlxlink-json_operational-info_edr.json.txt": "mlxlink",
    "gh-sonic-265_mlxlink_operational-info_25GbE.txt": "mlxlink",
    "sichek_mlxlink-m_module-info_osfp.txt": "mlxlink",
    "gh-snmp_exporter-1139_if_mib_output.prom": "prometheus",
    "gh-snmp_exporter-pr515_ifname-only_float-exponent.prom": "prometheus",
    "node_exporter_e2e-golden_infiniband.prom": "prometheus",
    "gh-sonic-swss-3757_show-interfaces-counters-fec-stats.txt": "sonic_fec_stats",
    "rdma-core_man_ibnetdiscover_topology-example.txt": "ibnetdiscover",
    "gh-HuangSeedFund_Evo2_nemo2-async-checkpoint.log": "nemo",
    "gh-ml-goodput-pr4_orbax-absl-checkpoint-save.log": "orbax_log",
    "gh-mmr-2_deepspeed-log_dist-format.log": "deepspeed",
    "gh-torchtitan-pr1287_steps_and_checkpoint_async.log": "torchtitan",
    "gh-torchtitan-pr3393_steps_with-grad_norm.log": "torchtitan",
    "gh-torchtitan-950_steps_dataset-relooped-warning.log": "torchtitan",
    "gh-torchtitan-1232_shell-trace-then-pp-steps.log": "torchtitan",
    "gh-dlrover-977_megatron-loading-checkpoint.log": "megatron",
    "gh-epfllm-megatron-llm-11_iteration-lines_no-timestamp.log": "megatron",
    "gh-megatron-lm-756_iteration-lines_ts-seconds.log": "megatron",
    "gh-swiss-ai-megatron-pr46_progress-txt.log": "megatron",
    "sherlock-docs_slurmstepd-job-requeue.log": "torch_log",
    # DeepSpeed's own lines after the Hugging Face Trainer's: DeepSpeed's logger is the firmer claim (both are read)
    "gh-transformers-pr14946_hf-trainer-save-then-deepspeed.log": "deepspeed",
    "gh-transformers-pr27820_hf-save-plain-then-deepspeed-torch-engine.log": "deepspeed",
    # NeMo 2 logs behind NeMo-Run's `ining-demo/0 ` and torchrun's `[default0]:`: read as NeMo once the envelope is
    # off (their NVRx lines are read by every job-log format)
    "nemo-resiliency-demo_nvrx-ft-launcher-in-job-restart_nemo-run-prefix.log": "nemo",
    "nemo-resiliency-demo_nvrx-straggler-detection_nemo-run-prefix.log": "nemo",
}
# Newer families (issue 35): the format by a part of the file name, in folders holding several formats.
BY_NAME_PART = [
    ("_nvidia-smi-q_", "nvidia_smi_q"),
    ("_nvidia-smi-a_", "nvidia_smi_q"),
    ("_nvidia-smi-query-gpu_", "nvidia_smi_csv"),
    ("_dcgmi-diag", "dcgmi_diag"),
    ("_TestDiagManagerStrings_", "dcgmi_diag"),
    ("fabric/sonic-utilities_", "sonic_counters"),
    ("ibswinfo", "ibswinfo"),
    ("_perfquery-E_", "ib_counters"),
    ("nccl-inspector_", "nccl_inspector"),
    ("nvrx-fr-dumps_", "flight_recorder"),
    ("nvrx-fr-attribution_", "fr_trace"),
    ("_torchfrtrace-", "fr_trace"),
    ("_nvrx-", "nvrx_log"),
]
TORCH_LOG = "torch_log"  # every other training gh-*.log: a failure log without framework lines


def expected_format(rel: str) -> str:
    name = rel.rsplit("/", 1)[-1]
    if name in BY_NAME:
        return BY_NAME[name]
    for part, fmt in BY_NAME_PART:
        if part in rel:
            return fmt
    for prefix, fmt in BY_PREFIX:
        if rel.startswith(prefix):
            return fmt
    if rel.startswith("real_samples/training/gh-"):
        return TORCH_LOG
    raise KeyError(rel)


def claimed_files() -> list[Path]:
    return [
        p
        for p in sorted(DATA.rglob("*"))
        if p.is_file() and p.suffix not in (".md", ".csv") and str(p.relative_to(DATA)) not in UNCLAIMED
    ]


@dataclass(frozen=True)
class Fact:
    file: str  # relative to tests/data/real_samples
    what: str
    sql: str  # one row, read after ingesting the file alone into an empty store (year 2025, UTC)
    expected: tuple
    host: str | None = None


def _f(file, what, sql, *expected, host=None) -> Fact:
    return Fact(file, what, sql, tuple(expected), host)


INC = "SELECT {} FROM job_incidents WHERE kind = '{}' ORDER BY line LIMIT 1"
EV = "SELECT {} FROM events WHERE kind = '{}' ORDER BY line LIMIT 1"
FACTS = [
    # 1. torchrun / ChildFailedError / Slurm / NCCL failures
    _f(
        "training/gh-cppo-6_childfailederror_sigkill.log",
        "root cause: rank, local rank, pid, exit code, signal",
        INC.format(
            "rank, fields->>'local_rank', fields->>'pid', fields->>'exitcode', fields->>'signal'", "worker_failed"
        ),
        0,
        "0",
        "14750",
        "-9",
        "SIGKILL",
    ),
    _f(
        "training/gh-cppo-6_childfailederror_sigkill.log",
        "root cause time (year, zone UTC)",
        INC.format("ts", "worker_failed"),
        datetime(2025, 5, 21, 15, 43, 3),
    ),
    _f(
        "training/gh-cppo-6_childfailederror_sigkill.log",
        "root cause host",
        INC.format("fields->>'host'", "worker_failed"),
        "mlxlab115rp2n7682d40d9-20250521025625-6dyyd3-8nir8b-worker",
    ),
    _f(
        "training/gh-llamafactory-7032_childfailederror_exitcode1.log",
        "exit code 1 is a Python exception",
        INC.format("fields->>'exitcode', contains(fields->>'meaning', 'Python exception')", "worker_failed"),
        "1",
        True,
    ),
    _f(
        "training/gh-colossalai-3514_torchrun-pylogging_exitcode-9.log",
        "torch 1.x agent line: local rank, pid, code",
        INC.format("fields->>'local_rank', fields->>'pid', fields->>'exitcode'", "worker_failed"),
        "3",
        "812917",
        "-9",
    ),
    _f(
        "training/gh-llama-856_torchrun-2.1-bracketed_exitcode-9.log",
        "torch 2.1 agent line: time with ms",
        INC.format("ts, fields->>'signal'", "worker_failed"),
        datetime(2023, 10, 13, 17, 40, 2, 544000),
        "SIGKILL",
    ),
    _f(
        "training/gh-megatron-lm-1880_torchrun-glog_exitcode-11.log",
        "glog agent line: code -11 is SIGSEGV",
        INC.format("fields->>'exitcode', fields->>'signal', ts", "worker_failed"),
        "-11",
        "SIGSEGV",
        datetime(2025, 12, 23, 5, 18, 2, 971000),
    ),
    _f(
        "training/gh-mmdetection-6779_torchelastic-restart_pylogging-format.log",
        "worker failure before the restart",
        INC.format("fields->>'pid', fields->>'exitcode'", "worker_failed"),
        "5534",
        "1",
    ),
    _f(
        "training/gh-arjuna-52_slurmstepd-oom-kill-stepid-batch.log",
        "slurmstepd oom-kill names job and step",
        INC.format("job_id, fields->>'step', fields->>'oom_kill_events'", "oom"),
        "191",
        "batch",
        "1",
    ),
    _f(
        "training/gh-m4-logs_srun-node-failure_step-cancelled-node-failure.log",
        "srun names the failed node; the STEP line the job (the file name has none)",
        "SELECT job_id, fields->>'host', fields->>'ended_by' FROM job_incidents WHERE kind = 'job_end' ORDER BY line "
        "LIMIT 1",
        "1943824",
        "jean-zay-iam37",
        "node_failure",
    ),
    _f(
        "training/sherlock-docs_slurmstepd-job-requeue.log",
        "a requeue is how the job ended, not a preemption",
        INC.format("job_id, ts, fields->>'ended_by'", "job_end"),
        "31182239",
        datetime(2018, 11, 5, 10, 35, 6),
        "requeue",
    ),
    _f(
        "training/gh-hafs-101_slurmstepd-oom-kill_srun-task-out-of-memory.log",
        "srun OOM: task (rank) and node",
        "SELECT rank, fields->>'host' FROM job_incidents WHERE kind = 'oom' AND rank IS NOT NULL",
        4,
        "Orion-01-01",
    ),
    _f(
        "training/gh-llamafactory-7396_watchdog_pid-prefix.log",
        "watchdog behind [PID]: rank, seq, began",
        INC.format("rank, seq, ts", "nccl_timeout"),
        0,
        1580,
        datetime(2025, 3, 21, 1, 57, 8, 348271),
    ),
    _f(
        "training/gh-sglang-1693_what-watchdog_pg3-rank5.log",
        "watchdog inside what(): rank 5, PG 3",
        INC.format("rank, seq, collective, fields->>'pg'", "nccl_timeout"),
        5,
        9141,
        "_ALLGATHER_BASE",
        "3",
    ),
    _f(
        "training/gh-vllm-6042_watchdog_ray-worker-prefix.log",
        "Ray prefix: one incident for a timeout printed twice",
        "SELECT count(*), min(rank), min(seq) FROM job_incidents WHERE kind = 'nccl_timeout'",
        1,
        1,
        158046,
    ),
    _f(
        "training/gh-nccl-902_nccl-warn-net-ib_bare-no-prefix.log",
        "bare NET/IB completion error: status, vendor err",
        INC.format("fields->>'status_name', fields->>'vendor_err'", "nccl_error"),
        "IBV_WC_RETRY_EXC_ERR",
        "129",
    ),
    _f(
        "training/gh-nccl-tests-166_nccl-warn-socket-connect-failed.log",
        "NCCL connect failure: host, peer, error",
        INC.format("fields->>'host', fields->>'connect_to', fields->>'connect_error'", "nccl_error"),
        "ubuntu",
        "10.0.0.2",
        "Software caused connection abort",
    ),
    _f(
        "training/gh-nccl-1405_nccl-warn-net-ib-completion-status12.log",
        "NET/IB status 12 and direction",
        INC.format("fields->>'status', fields->>'direction'", "nccl_error"),
        "12",
        "Recv",
    ),
    # 2. sacct
    _f(
        "training/sacct_gh-soperator-pr321_sacct-fixed-width_trailing-blanks.txt",
        "fixed width: job 20 FAILED",
        "SELECT state FROM jobs WHERE job_id = '20'",
        "FAILED",
    ),
    _f(
        "training/sacct_gh-soperator-pr321_sacct-fixed-width_trailing-blanks.txt",
        "fixed width: step rows",
        "SELECT count(*) FILTER (WHERE step = '0') FROM sacct_rows",
        4,
    ),
    _f(
        "training/sacct_gh-alan-cluster-6_sacct-fixed-width_right-aligned-header.txt",
        "right-aligned header: 3 jobs",
        "SELECT string_agg(job_id, ',' ORDER BY job_id) FROM jobs",
        "1000146,1000148,1000149",
    ),
    _f(
        "training/tdhock-slurm_sacct-P-tab_oom.txt",
        "OUT_OF_MEMORY step exit code",
        "SELECT exit_code FROM sacct_rows WHERE state = 'OUT_OF_MEMORY'",
        "0:125",
    ),
    # 3. syslog variants
    _f(
        "syslog/gh-sonic-platform-daemons-pr539_sonic-year-first_pmon-xcvrd.log",
        "SONiC year-first time and host",
        "SELECT ts, host, severity FROM events ORDER BY line LIMIT 1",
        datetime(2024, 9, 18, 21, 37, 2, 573152),
        "sonic",
        "notice",
    ),
    _f(
        "syslog/lkp-202302211644_dmesg-printk-caller_e1000-link-up.log",
        "printk caller id: the link event is found",
        EV.format("component, fields->>'driver'", "link_up"),
        "eth0",
        "e1000",
        host="lkp",
    ),
    _f(
        "syslog/ubuntuforums-2017_rfc3164_nvrm-gpu-at-fallen-off-bus-older-wording.log",
        "older NVRM wording",
        EV.format("component, host", "gpu_fell_off_bus"),
        "00000000:01:00.0",
        "zozio32-p6-2487ea",
    ),
    _f(
        "syslog/gh-sonic-buildimage-7310_sonic-hiprec_igb-nic-link-down.log",
        "igb NIC Link is Down",
        EV.format("component, fields->>'driver', host", "link_down"),
        "eth0",
        "igb",
        "str-s6100-acs-4",
    ),
    _f(
        "syslog/gh-pf-ring-293_rfc3164_ixgbe-nic-link-up-down.log",
        "ixgbe up at 10 Gb/s",
        EV.format("component, fields->>'speed_mbps'", "link_up"),
        "eth11",
        "10000",
    ),
    _f(
        "syslog/list-i40e-pause-frames_dmesg_i40e-nic-link-up.log",
        "i40e up at 40 Gb/s",
        EV.format("component, fields->>'speed_mbps'", "link_up"),
        "eth0",
        "40000",
        host="n",
    ),
    _f(
        "syslog/lkml-target-devel-2023-01_dmesg-r_ice-nic-link-up-fec.log",
        "ice up, negotiated FEC (dmesg -r: level first)",
        EV.format("component, fields->>'fec', severity", "link_up"),
        "ice0",
        "RS-FEC",
        None,
        host="n",
    ),
    _f(
        "syslog/gh-systemd-1401_journal-short_logs-begin-header_de.log",
        "journal header kept, at its next message's time and host",
        "SELECT host, strftime(ts, '%m-%d %H:%M:%S') FROM events WHERE line = 1",
        "pc6",
        "09-30 16:21:44",
    ),
    _f(
        "syslog/lkml-swiotlb-force_dmesg_bnxt-en-nic-link-up.log",
        "bnxt_en up at 25 Gb/s",
        EV.format("component, fields->>'driver', fields->>'speed_mbps'", "link_up"),
        "eno2np0",
        "bnxt_en",
        "25000",
        host="n",
    ),
    _f(
        "syslog/gh-mrchromebox-firmware-143_dmesg_ata-sata-link-down-not-a-nic.log",
        "SATA link down is no NIC event",
        "SELECT count(*) FROM events WHERE kind <> 'log'",
        0,
        host="n",
    ),
    _f(
        "syslog/gh-iml-pr107_rfc3164-fqdn_lustre-mgs-server-connection-restored.log",
        "Lustre server keeps its role",
        EV.format("component, fields->>'role', fields->>'client', host", "lustre_restored"),
        "MGS",
        "server",
        "c7547940-8b66-9e67-9f49-79141907f91f",
        "lotus-55vm15",
    ),
    _f(
        "syslog/gh-node-problem-detector-pr708_dmesg-T_ixgbe-nic-link.log",
        "dmesg -T link down time",
        EV.format("ts", "link_down"),
        datetime(2021, 5, 26, 15, 21, 5),
        host="n",
    ),
    _f(
        "syslog/gh-aws-parallelcluster-2701_rfc3164_lustre-connection-lost.log",
        "Lustre client keeps its role",
        EV.format("component", "lustre_lost"),
        "no2zxbmv-MDT0000",
    ),
    # 5. DCGM exporter label variants
    _f(
        "dcgm/notes-a800-mig_dcgm-exporter_process-name-label.prom",
        "DCGM_FI_PROCESS_NAME is no part of the entity",
        "SELECT entity FROM metrics WHERE metric = 'DCGM_FI_DEV_ENC_UTIL' ORDER BY entity LIMIT 1",
        "gpu1",
    ),
    _f(
        "dcgm/gpu-monitoring-tools_README_prometheus-dcgm_legacy-names.prom",
        "legacy dcgm_power_usage is power",
        "SELECT entity, value FROM metrics WHERE metric = 'gpu_power_watts'",
        "gpu0",
        31.737,
        host="n",
    ),
    _f(
        "dcgm/gpu-monitoring-tools_README_prometheus-dcgm_legacy-names.prom",
        "legacy lowercase uuid label is the UUID",
        "SELECT uuid FROM gpus WHERE entity = 'gpu0'",
        "GPU-8f640a3c-7e9a-608d-02a3-f4372d72b323",
        host="n",
    ),
    # 6. NIC and fabric counters
    _f(
        "fabric/gh-ethq-6_ethtool-S_bnx2x-per-queue.txt",
        "per-queue ethtool counter keeps its queue",
        "SELECT entity, value FROM metrics WHERE metric = 'eth_rx_bytes' ORDER BY entity LIMIT 1",
        "eth0/q0",
        209487403324.0,
        host="n",
    ),
    _f(
        "fabric/gpud_sys-class-infiniband_h100_snapshot.txt",
        "8-bit link_downed stuck at 255 is no count",
        "SELECT count(*) FROM metrics WHERE metric = 'ib_port_link_downed_total' AND entity = 'mlx5_1'",
        0,
        host="n",
    ),
    _f(
        "fabric/gh-rdma-core-pr847_ibstat_mlx4-2port_verbose.txt",
        "ibstat port 2: CA:port, state, phys state, rate",
        "SELECT entity, list(value ORDER BY metric) FROM metrics WHERE entity = 'mlx4_0:2' GROUP BY entity",
        "mlx4_0:2",
        [5.0, 7e9, 4.0],
        host="n",
    ),
    _f(
        "fabric/gh-rdma-core-pr847_ibstat_mlx4-2port_verbose.txt",
        "ibstat port 1 Down/Disabled at 10 Gb/s",
        "SELECT list(value ORDER BY metric) FROM metrics WHERE entity = 'mlx4_0'",
        [3.0, 1.25e9, 1.0],
        host="n",
    ),
    _f(
        "fabric/gh-l2fwd-nv-6_ibstat_cx6dx-roce.txt",
        "ibstat second CA Active/LinkUp at 100 Gb/s",
        "SELECT list(value ORDER BY metric) FROM metrics WHERE entity = 'mlx5_1'",
        [5.0, 12.5e9, 4.0],
        host="n",
    ),
    # 9. Envelopes: prompts, quotes, indentation, prefixes, wrapped lines (formats/envelope.py)
    _f(
        "training/gh-open-r1-620_watchdog_wrapped-at-terminal-width.log",
        "a watchdog line cut at the terminal's width keeps its collective, seq, timeout, ran-for",
        INC.format("rank, collective, seq, timeout_ms, ran_for_ms", "nccl_timeout"),
        2,
        "BROADCAST",
        4,
        1800000,
        1800010,
    ),
    _f(
        "training/gh-milabench-pr269_host-stderr-prefix_watchdog-word-wrapped.log",
        "behind `host [stderr]`, word-wrapped: the timeout and its companion's last completed work",
        "SELECT collective, seq, ran_for_ms, fields->>'last_completed' FROM job_incidents WHERE rank = 12 "
        "ORDER BY line LIMIT 1",
        "REDUCE",
        2070,
        600036,
        "2069",
    ),
    _f(
        "training/sacct_gh-desispec-2744_user-host-prompt_sacct-j_fixed-width.txt",
        "sacct behind `user@host [dir]$ sacct -j`: the allocation row",
        "SELECT job_id, state FROM sacct_rows ORDER BY line LIMIT 1",
        "52222788",
        "COMPLETED",
    ),
    _f(
        "syslog/gh-akash-support-244_root-prompt_dmesg-T-grep-nvrm.log",
        "dmesg behind `root@node4:~#`: the prompt names the host",
        EV.format("host, code, component", "xid"),
        "node4",
        43,
        "00000000:00:05.0",
    ),
    _f(
        "syslog/gpud-pr46_xid-readme_markdown-quoted_dmesg-ctime.log",
        "dmesg quoted with `> `: Xid 109, its pid and time",
        "SELECT code, fields->>'pid', ts FROM events WHERE kind = 'xid' ORDER BY line DESC LIMIT 1",
        109,
        "1797828",
        datetime(2024, 8, 30, 11, 43, 14),
        host="n",
    ),
    _f(
        "syslog/lkml-2025-i40e-reboot_quoted-email_ghes-pcie-fatal.log",
        "a quoted e-mail's firmware-first report: the device and severity",
        EV.format("component, fields->>'severity', fields->>'pci_id'", "aer"),
        "0000:05:00.1",
        "fatal",
        "8086:1572",
        host="n",
    ),
    _f(
        "training/gh-llamafactory-8261_line-numbered-paste_watchdog-sequence-id.log",
        "behind a viewer's `[1787] ` line numbers",
        INC.format("rank, collective, seq", "nccl_timeout"),
        2,
        "ALLREDUCE",
        2847,
    ),
    _f(
        "training/gh-torchtitan-1232_shell-trace-then-pp-steps.log",
        "a shell trace before torchtitan's steps: every step read, no reject",
        "SELECT count(*), min(iteration) FROM steps",
        4,
        1,
    ),
    # 10. Firmware-first PCIe and EDAC reports
    _f(
        "syslog/lkml-2020-06-amd-pci-bridge_rfc3164_ghes-pcie-corrected.log",
        "GHES PCIe section: device from its device_id line, corrected, PCI ids",
        EV.format("component, fields->>'severity', fields->>'pci_id', fields->>'port_type'", "aer"),
        "0000:60:03.1",
        "corrected",
        "1022:1453",
        "root port",
    ),
    _f(
        "syslog/lkml-2022-08-tg3-s5-reboot_dmesg_ghes-pcie-fatal-endpoint.log",
        "GHES fatal on an end point, with its uncorrectable status",
        EV.format("component, fields->>'severity', fields->>'aer_uncor_status'", "aer"),
        "0000:04:00.0",
        "fatal",
        "0x00100000",
        host="n",
    ),
    _f(
        "syslog/lkml-2024-ice-pfr-reset_dmesg_ghes-pcie-recoverable-root-port.log",
        "GHES recoverable is AER's non-fatal",
        EV.format("component, fields->>'severity'", "aer"),
        "0000:c9:02.0",
        "non_fatal",
        host="n",
    ),
    _f(
        "syslog/gh-machine-shop-maintenance-66_dmesg-T_edac-ce-memory-read.log",
        "EDAC corrected errors: count, DIMM, time",
        EV.format("component, fields->>'severity', fields->>'count', ts", "edac"),
        "MC1/CPU_SrcID#0_Ha#0_Chan#1_DIMM#0",
        "corrected",
        "262",
        datetime(2022, 10, 3, 13, 52, 42),
        host="n",
    ),
    _f(
        "syslog/gh-openstreetmap-operations-300_rfc3164-printk_edac-ce-error-short-wording.log",
        "EDAC's short `N CE error on` wording, every report",
        "SELECT count(*), sum(CAST(fields->>'count' AS INTEGER)), min(host) FROM events WHERE kind = 'edac'",
        7,
        16,
        "errol",
    ),
    _f(
        "syslog/gh-radiasoft-devops-134_rfc3164-no-host_edac-ce-scrubbing.log",
        "EDAC on a line whose host was removed",
        EV.format("fields->>'error', fields->>'location'", "edac"),
        "memory scrubbing error",
        "CPU_SrcID#1_Ha#0_Chan#0_DIMM#0",
        host="n",
    ),
    # 11. Per-queue NIC counters in every driver's words, behind prompts
    _f(
        "fabric/gh-netutils-linux-208_ethtool-S_be2net-rxq-prefixed.txt",
        "be2net `rxq0: rx_bytes: N` is queue 0's",
        "SELECT entity, value FROM metrics WHERE metric = 'eth_rx_bytes'",
        "/q0",
        176801887745990.0,
        host="n",
    ),
    _f(
        "fabric/gh-ethq-15_prompt-ethtool-i-and-S_ena-queue-N.txt",
        "ENA `queue_1_tx_cnt` behind `# ethtool -S eth0`, ethtool -i output no reject",
        "SELECT entity, value FROM metrics WHERE metric = 'eth_tx_cnt' ORDER BY entity DESC LIMIT 1",
        "eth0/q1",
        4468943.0,
        host="n",
    ),
    _f(
        "fabric/gh-netdata-17015_prompt-ethtool-S_virtio-rx-queue-N.txt",
        "virtio `rx_queue_3_packets`",
        "SELECT value FROM metrics WHERE metric = 'eth_rx_packets' AND entity = 'eth0/q3'",
        156304.0,
        host="n",
    ),
    _f(
        "fabric/gh-ethq-20_ethtool-S-grep-xdp_mlx5-rx0-queue.txt",
        "mlx5 `rx0_xdp_*` per queue, `rx_xdp_*` the port's",
        "SELECT count(*) FILTER (WHERE entity = '/q0'), max(value) FILTER (WHERE entity IS NULL) FROM metrics",
        7,
        59031087.0,
        host="n",
    ),
    _f(
        "training/gh-horovod-789_container-hostname_nccl-warn-ibverbs.log",
        "NCCL WARN of a container: its host is the container id",
        INC.format("fields->>'host', message", "nccl_error"),
        "51ca79e04561",
        "Failed to open libibverbs.so[.1]",
    ),
    _f(
        "training/gh-long-range-grouping-transformer-13_sh-command_nccl-warn-duplicate-gpu.log",
        "both ranks' `Duplicate GPU detected`, at their lines",
        "SELECT list(line ORDER BY line) FROM job_incidents WHERE kind = 'nccl_error'",
        [14, 18],
    ),
    _f(
        "syslog/gh-ms-02-ultra-10_rfc3164_aer-uncorrectable-nonfatal-acsviol.log",
        "AER non-fatal without `id=`: device, severity, bit",
        EV.format("component, fields->>'severity', fields->>'errors'", "aer"),
        "0000:80:1b.4",
        "non_fatal",
        '["ACSViol"]',
    ),
    _f(
        "syslog/gh-raspberry-pi-pcie-devices-64_dmesg_aer-corrected-physical-layer-multiple.log",
        "three corrected reports of one root port",
        "SELECT count(*), min(fields->>'severity'), min(fields->>'type') FROM events WHERE kind = 'aer'",
        3,
        "corrected",
        "Physical Layer",
        host="n",
    ),
    _f(
        "syslog/gh-ovirt-node-ng-image-88_rfc3164-fqdn_edac-amd64-init.log",
        "EDAC start-up lines are no memory error",
        "SELECT count(*) FILTER (WHERE kind = 'edac'), min(host) FROM events",
        0,
        "ovnode02",
    ),
    _f(
        "syslog/gh-bumblebee-677_dmesg_xid32-xid31-old-wording.log",
        "2015 Xid wording",
        "SELECT list(code ORDER BY line) FROM events WHERE kind = 'xid'",
        [32, 32, 31],
        host="n",
    ),
    # 12. DCGM exporter: empty k8s labels
    _f(
        "dcgm/gh-dcgm-exporter-58_empty-k8s-labels_titan-v.prom",
        "empty container/pod/namespace are no part of the entity",
        "SELECT host, entity FROM metrics WHERE value = 1335",
        "dcgm-exporter-lcxpl",
        "gpu4",
    ),
    _f(
        "dcgm/gh-gpu-monitoring-tools-138_empty-k8s-labels_no-hostname.prom",
        "eight fields, one entity, catalog names",
        "SELECT count(DISTINCT entity), count(DISTINCT metric) FILTER (WHERE metric LIKE 'gpu_%') FROM metrics",
        1,
        8,
        host="n",
    ),
    # 13. The next formats on-call engineers paste (issue 35, class 5)
    _f(
        "nvidia/gpud_nvidia-smi-q_535.129.03_a10_row-remap-pending.txt",
        "nvidia-smi -q identity: UUID, bus id, product",
        "SELECT entity, uuid, pci_bus_id, model FROM gpus",
        "gpu0",
        "GPU-73d12ef7-f589-f867-4259-c7090ab44736",
        "00000000:07:00.0",
        "NVIDIA A10",
        host="n",
    ),
    _f(
        "nvidia/gpud_nvidia-smi-q_535.129.03_a10_row-remap-pending.txt",
        "nvidia-smi -q: serial, row remapping pending, at the report's time stamp",
        "SELECT e.fields->>'serial', m.value, m.ts FROM events e, metrics m "
        "WHERE e.kind = 'gpu_identity' AND m.metric = 'gpu_row_remap_pending'",
        "1324521052681",
        1.0,
        datetime(2024, 9, 25, 10, 40, 24),
        host="n",
    ),
    _f(
        "nvidia/aau-aicloud-docs_nvidia-smi-query-gpu_csv_units.txt",
        "--query-gpu CSV with units: free memory, its own time stamp",
        "SELECT entity, value, ts FROM metrics WHERE metric = 'gpu_fb_free_mib' ORDER BY ts LIMIT 1",
        "gpu0",
        1486.0,
        datetime(2020, 11, 12, 13, 48, 11, 412000),
        host="n",
    ),
    _f(
        "nvidia/gh-go-dcgm-52_dcgmi-diag-r2_3.3.1_gpu-memory-fail_fragment.txt",
        "dcgmi diag: GPU 0 failed the memory test",
        "SELECT component, severity, fields->>'test' FROM events WHERE fields->>'status' = 'Fail'",
        "gpu0",
        "err",
        "GPU Memory",
        host="n",
    ),
    _f(
        "slurm/gh-aws-parallelcluster-5670_slurmctld_requeue-node-failure_power-save.log",
        "slurmctld requeue: job, time, node",
        INC.format("job_id, ts, fields->>'host'", "requeue"),
        "10",
        datetime(2023, 8, 28, 16, 55, 46, 905000),
        "a10g-1x-spot-dy-a10g-1x-spot-cr-0-1",
        host="head-node",
    ),
    _f(
        "fabric/sonic-utilities_command-reference_show-interfaces-counters.txt",
        "SONiC RX_DRP with thousands separators",
        "SELECT value FROM metrics WHERE metric = 'if_in_discards_total' AND entity = 'Ethernet0'",
        18682.0,
        host="n",
    ),
    _f(
        "fabric/stanford-rc-ibswinfo_readme_default-output_qm8790.txt",
        "ibswinfo: part number, firmware, fan 1",
        "SELECT e.fields->>'part', e.fields->>'firmware', m.value FROM events e, metrics m "
        "WHERE e.kind = 'switch_identity' AND m.metric = 'ibswinfo_fan_rpm' AND m.entity = 'fan1'",
        "MQM8790-HS2F",
        "27.2000.1886",
        5426.0,
        host="n",
    ),
    _f(
        "fabric/treydock-infiniband_exporter_perfquery-E_lid2052-port1.txt",
        "perfquery -E: the six PortRcvErrorDetails counters of lid 2052",
        "SELECT count(*), min(entity) FROM metrics WHERE metric LIKE 'ib_port_rcv_%'",
        6,
        "lid2052",
        host="n",
    ),
    _f(
        "collectives/nccl-inspector_readme-2.28.1_coll-perf_allreduce.json",
        "NCCL Inspector: rank 2's AllReduce bus bandwidth, host, dump time",
        "SELECT entity, value, host, ts FROM metrics WHERE metric = 'nccl_coll_busbw_gbs'",
        'rank2{comm="0x7f8c496ae9f661",coll="AllReduce"}',
        485.119099,
        "cw-dfw-h100-002-243-012",
        datetime(2025, 5, 23, 19, 59, 37, 748202),
    ),
    _f(
        "collectives/nvrx-fr-dumps_gpu_error_1st/_dump_12",
        "Flight Recorder pickle: rank, world size, dump time",
        INC.format("rank, fields->>'world_size', ts", "fr_dump"),
        12,
        "16",
        datetime(2025, 9, 23, 6, 55, 5, 924024),
    ),
    _f(
        "collectives/nvrx-fr-attribution_collective-analyzer_gpu-error-1st.txt",
        "NVRx collective analyser: the missing rank and its group",
        INC.format("rank, collective, fields->>'pg_desc'", "fr_missing_rank"),
        12,
        "nccl:all_to_all",
        "EXPERT_MODEL_PARALLEL_GROUP",
    ),
    _f(
        "collectives/pytorch-tutorials_flight-recorder_torchfrtrace-missing-rank.txt",
        "fr_trace: rank 1 missing from all_reduce #5",
        INC.format("rank, collective, seq", "fr_missing_rank"),
        1,
        "nccl:all_reduce",
        5,
    ),
    _f(
        "training/nemo-docs-resiliency_nvrx-straggler-report_512-ranks.log",
        "NVRx straggler report: worst rank, its node and score, ranks scored",
        INC.format("rank, fields->>'host', fields->>'score', fields->>'ranks'", "straggler_report"),
        76,
        "h100-001-253-012",
        "0.94",
        "512",
    ),
    _f(
        "training/nemo-resiliency-demo_nvrx-straggler-detection_nemo-run-prefix.log",
        "NVRx straggler warning: the ranks named, on their node",
        "SELECT list(rank ORDER BY rank), min(fields->>'host') FROM job_incidents WHERE kind = 'straggler'",
        [0, 1, 2, 4, 5, 6],
        "4809917ea058",
    ),
    _f(
        "training/nemo-resiliency-demo_nvrx-straggler-detection_nemo-run-prefix.log",
        "behind NeMo-Run's and torchrun's prefixes: the straggler warning dated by its NeMo line",
        "SELECT min(ts) FROM job_incidents WHERE kind = 'straggler'",
        datetime(2025, 3, 7, 22, 43, 58),
    ),
    _f(
        "training/nemo-resiliency-demo_nvrx-straggler-detection_nemo-run-prefix.log",
        "two saves, the one the straggler stop forced numbered by its file (step=16) though step 16 was never printed",
        "SELECT list((iteration, end_ts) ORDER BY line) FROM checkpoints WHERE kind = 'save'",
        [(9, datetime(2025, 3, 7, 22, 43, 12)), (16, datetime(2025, 3, 7, 22, 43, 58))],
    ),
    _f(
        "training/nemo-resiliency-demo_nvrx-ft-launcher-in-job-restart_nemo-run-prefix.log",
        "behind NeMo-Run's and torchrun's prefixes: the saves (iteration, finalized at) and the restore in attempt 2",
        "SELECT list((kind, iteration, attempt, end_ts) ORDER BY line) FROM checkpoints",
        [
            ("save", 9, 1, datetime(2025, 3, 7, 22, 38, 44)),
            ("restore", 9, 2, datetime(2025, 3, 7, 22, 39, 50)),
            ("save", 19, 2, datetime(2025, 3, 7, 22, 41, 13)),
        ],
    ),
    _f(
        "training/nemo-resiliency-demo_nvrx-ft-launcher-in-job-restart_nemo-run-prefix.log",
        "ft_launcher's in-job restart: dated, and the log's two attempts split at it",
        "SELECT (SELECT ts FROM job_incidents WHERE kind = 'elastic_restart'), (SELECT count(*) FROM attempts)",
        datetime(2025, 3, 7, 22, 39, 36, 177000),
        2,
    ),
    # 8. Prometheus exposition
    _f(
        "prometheus/prometheus-common_expfmt-case2_whitespace-escapes.prom",
        "every valid line of the case is read",
        "SELECT count(*) FROM metrics",
        4,
    ),
]


def _ingest_one(path: Path, host: str | None):
    from synestra_cli.formats.base import IngestOptions
    from synestra_cli.ingest import ingest_file
    from synestra_cli.store.connect import memory_store

    conn = memory_store()
    report = ingest_file(conn, path, IngestOptions(year=2025, host=host))
    return conn, report


def score() -> tuple[list[str], list[str], int, int]:
    """(misses in recognition, misses in facts, files, facts)."""
    from synestra_cli.errors import UnknownFormatError
    from synestra_cli.ingest.plan import recognise

    recognition = []
    files = claimed_files()
    for p in files:
        rel = str(p.relative_to(DATA))
        try:
            got = recognise(p)[0].name  # as ingest sees it: through the envelope of a paste
        except UnknownFormatError:
            got = "unknown format"
        if got != expected_format(rel):
            recognition.append(f"{rel}: {got}, expected {expected_format(rel)}")
    wrong = []
    for fact in FACTS:
        conn, report = _ingest_one(S / fact.file, fact.host)
        try:
            got = tuple(conn.execute(fact.sql).fetchone() or ()) if report.status == "loaded" else (report.error,)
        finally:
            conn.close()
        got = tuple(json.loads(json.dumps(x)) if isinstance(x, bool) else x for x in got)
        if got != fact.expected:
            wrong.append(f"{fact.file}: {fact.what}: got {got}, expected {fact.expected}")
    return recognition, wrong, len(files), len(FACTS)


def main() -> int:
    recognition, wrong, n_files, n_facts = score()
    print(f"recognised without --format: {n_files - len(recognition)}/{n_files} files")
    print(f"facts right: {n_facts - len(wrong)}/{n_facts}")
    for line in recognition + wrong:
        print("  MISS", line)
    return 0 if not recognition and not wrong else 1


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    sys.exit(main())
