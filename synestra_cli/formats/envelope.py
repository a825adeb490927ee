"""How the text reached the user, taken off before any format sees it: the envelope of a paste.

A log or an export is often read the way a person or a collector handed it over, not as the tool wrote
it: behind the shell prompt and the command that printed it (`root@gpu-7:~# dmesg`, `$ sacct -j 42`,
`(venv) user@h:~/x$ …`, `>>> `), indented or quoted as a whole (a Markdown list, an e-mail's `> `), with a
prefix on every line added by a launcher or collector (srun -l's `12: `, pdsh's `host: `, `[host]: `,
`stderr: `, Open MPI's `[1,0]<stderr>:`, `[rank3]:`, Ray's `(RayWorkerWrapper pid=…)`, kubectl
`--timestamps`, a CRI container log `<time> stdout F <line>`, a docker json-file object), and with long
lines cut at a terminal's width or split by the runtime (CRI `P` partial lines).

`detect(head)` reads the first 64 KiB and says which of these the file carries (an `Envelope`, or None);
`normalise` applies it to a table of lines in DuckDB (envelope_sql.py): every line keeps its number (a
removed line becomes empty, a joined line's continuation too), so each `file:line` still points at the
user's file, and the prefix's information (host, rank, stream, time, tag) is kept per line number as a
table the formats may use (`Envelope.columns`). The orchestrator (ingest/parse.py) sniffs the normalised
head and lets every format load from a normalised copy, as it does for UTF-16.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

# The leading prompt and echoed command: `$ cmd`, `# cmd`, `% cmd`, `>>> cmd`, `user@host:~/x$ cmd`,
# `desi@login26 [matterhorn]$ cmd`, `[root@node-1 ~]# cmd`, each optionally behind a `(venv) `.
PROMPT = re.compile(
    r"^(?:\([\w.-]+\)\s*)?"
    r"(?:(?P<user>[\w.-]+)@(?P<host>[\w.-]+)[^$#\n]{0,60}?[$#]"
    r"|\[[\w.-]+@(?P<bhost>[\w.-]+)[^\]\n]{0,60}\]\s?[$#]"
    r"|(?P<bare>[$#%]|>>>))"
    r"(?:\s+(?P<cmd>\S.*?))?\s*$"
)
# A bare `# ` is a root prompt only before a command word (`# ethtool -S eth0`), never a comment of the
# format itself (`# HELP`, `# Port counters`, `# EOF`): lowercase, then an option, an argument or nothing.
BARE_HASH_COMMAND = re.compile(r"^[a-z][\w.+-]*(?:\s+[-/.\w\"'|$~=].*)?$")


@dataclass(frozen=True)
class Prefix:
    """A per-line prefix a launcher or collector adds: its pattern (named groups kept as columns)."""

    kind: str
    pattern: str  # a Python regex, also valid for DuckDB's RE2: groups host, rank, stream, ts, tag, partial, body
    literal: str = ""  # a literal every matching line contains (a cheap prefilter)


# Tried in this order; the first that fits most lines of the head wins. kubectl's `--timestamps` is RFC 3339
# with nanoseconds in UTC (`2024-05-01T10:00:00.123456789Z`); a CRI log adds the stream and F/P (full or
# partial line); docker's json-file is a JSON object per line (envelope_sql.py reads it with json functions).
TS = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:\d\d)"
# torchrun's `--tee` prefix on a worker's lines: `[${role_name}${local_rank}]:` by default
# (torch/distributed/elastic/agent/server/local_elastic_agent.py), `[default0]:` for torchrun's default role;
# no blank after the colon (the worker's line follows as written). `[rank3]:` (role `rank`) is the `rank` kind.
TORCHRUN_TEE = r"\[(?P<role>[A-Za-z_]+?)(?P<local_rank>\d{1,4})\]:"
PREFIXES = (
    Prefix("docker_json", r'^\{"log":"(?P<body>.*)', '{"log":'),
    Prefix("cri", rf"^(?P<ts>{TS}) (?P<stream>stdout|stderr) (?P<partial>[FP])(?: (?P<body>.*))?$"),
    Prefix("kubectl_timestamps", r"^(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{1,9}Z) (?P<body>.*)$"),
    Prefix("openmpi_tag", r"^\[(?P<tag>\d+),(?P<rank>\d+)\]<(?P<stream>stdout|stderr)>:\s?(?P<body>.*)$", "]<std"),
    Prefix("stream_tag", r"^(?:(?P<host>[\w.-]+) )?\[(?P<stream>stdout|stderr)\] (?P<body>.*)$", "] "),
    Prefix("stream", r"^(?P<stream>stdout|stderr): (?P<body>.*)$", ": "),
    Prefix("srun_task", r"^ *(?P<rank>\d{1,6}): (?P<body>.*)$", ": "),
    Prefix(
        "ray",
        r"^(?:\x1b\[[0-9;]*m)?\((?P<tag>[A-Za-z_]\w*)(?: pid=\d+)?(?:, ip=(?P<host>[\d.]+))?\)"
        r"(?:\x1b\[0m)? (?P<body>.*)$",
        "pid=",
    ),
    Prefix("rank", r"^\[rank(?P<rank>\d+)\]: ?(?P<body>.*)$", "[rank"),
    # NeMo-Run relaying a task's output (nemo_run/run/logs.py): `{GREEN}{role_name[-10:]}/{replica_id}{ENDC} `,
    # the role (the task's name) cut to its last 10 characters, green only on a terminal (not a digit first: a
    # progress bar's `10/100 [===>…` is no task); under torchrun
    # (`--tee 3`) the worker's lines carry torchrun's own `[{role}{local_rank}]:` behind it.
    Prefix(
        "nemo_run",
        r"^(?:\x1b\[[0-9;]*m)?(?P<tag>[A-Za-z_.-][\w.-]{0,9}/\d{1,5})(?:\x1b\[0m)? "
        rf"(?:{TORCHRUN_TEE})?(?P<body>.*)$",
        "/",
    ),
    Prefix("host_bracket", r"^\[(?P<host>[A-Za-z][\w.-]*)\]: (?P<body>.*)$", "]: "),
    # torchrun `--tee` alone: after host_bracket, whose `[host]: ` takes a blank torchrun does not write
    Prefix("torchrun_tee", rf"^{TORCHRUN_TEE}(?P<body>.*)$", "]:"),
    Prefix("host", r"^(?P<host>[A-Za-z][\w.-]*[\w]): (?P<body>.*)$", ": "),
    # another logger's header in front of a trainer's own: `2025-06-25 12:56:09,436 - INFO - [titan] …`
    Prefix(
        "logger_header",
        r"^(?P<ts>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?)\S* .{0,80}?(?P<body>\[titan\] .*)$",
        "[titan] ",
    ),
)
BY_KIND = {p.kind: p for p in PREFIXES}
# Prefixes every job-log format already reads behind (formats/training/joblog.py RANK_PREFIX): alone, they are no
# reason to read a file another way than its sniffer recognised it.
NATIVE_PREFIXES = ("rank", "ray")
# Words a kernel or a tool puts first on its own lines (`NVRM: Xid …`, `kernel: …`, `srun: error: …`): not
# the host names a pdsh/clush prefix carries.
NOT_HOSTS = frozenset(
    [
        "NVRM",
        "kernel",
        "nfs",
        "Lustre",
        "LustreError",
        "LNet",
        "LNetError",
        "pcieport",
        "audit",
        "systemd",
        "mlx5_core",
        "ERROR",
        "Error",
        "error",
        "WARNING",
        "Warning",
        "warning",
        "WARN",
        "INFO",
        "Info",
        "info",
        "DEBUG",
        "Debug",
        "debug",
        "NOTE",
        "Note",
        "note",
        "Traceback",
        "File",
        "srun",
        "slurmstepd",
        "sbatch",
        "salloc",
        "NCCL",
        "RuntimeError",
        "ValueError",
        "KeyError",
        "Exception",
        "raise",
        "what",
        "iteration",
        "Iteration",
        "Epoch",
        "epoch",
        "step",
        "Step",
        "loss",
        "Loss",
        "time",
        "Time",
        "Date",
        "date",
        "Host",
        "host",
        "Name",
        "name",
        "Driver",
        "Version",
        "Total",
        "Usage",
        "usage",
        "Example",
        "example",
    ]
)
FIT = 0.8  # a prefix must be on this share of the head's non-blank lines (continuation lines are the rest)
# Prefixes a launcher puts on each line it relays: a line without one after a line with one is that line
# wrapped (milabench's `host [stderr] …` word-wrapped at 160 columns), so half the lines may lack it.
LINE_PREFIXES = ("stream_tag", "stream", "host", "host_bracket", "srun_task", "openmpi_tag")
LINE_FIT = 0.5
MIN_LINES = 2
WRAP_MIN = 60  # a terminal narrower than this is not one a log was pasted from

# Records a format knows continue when cut: an NCCL watchdog line ends `… before timing out.`, its companion
# `… last completed NCCL work: N.`; a line holding the start and not the end goes on in the next line.
CONTINUED = (
    ("Watchdog caught collective operation timeout", "before timing out"),
    ("detected by watchdog at work", "last completed NCCL work"),
    ("Exception (either an error or timeout) detected", "last completed NCCL work"),
)


@dataclass(frozen=True)
class Envelope:
    """What wraps this file's text: each part optional; `Envelope()` alone changes nothing."""

    quote: bool = False  # every line behind `> ` (an e-mail or Markdown quote)
    indent: str = ""  # the indentation every line shares (2, 4, 8 blanks, a tab), after the quote
    prompt_lines: tuple[int, ...] = ()  # 1-based numbers of the prompt lines (leading echo, trailing prompt)
    command: str | None = None  # the echoed command (`ethtool -S eth0`): formats read their device from it
    command_line: int = 0  # its line number
    command_text: str = ""  # that line as written (its prompt kept): what a format reading commands sees
    prompt_host: str | None = None  # the host a prompt names (`root@gpu-7:~#`)
    prefix: str | None = None  # Prefix.kind of the per-line prefix
    wrap_width: int = 0  # lines this long were cut at a terminal's width: joined with the next line
    hosts: tuple[str, ...] = field(default=())  # the prefix's hosts seen in the head

    def __bool__(self) -> bool:
        return bool(self.quote or self.indent or self.prompt_lines or self.prefix or self.wrap_width)

    @property
    def only_native(self) -> bool:
        """Nothing but a prefix the formats read behind anyway (`[rank3]:`, Ray's `(pid=…)`)."""
        return self.prefix in NATIVE_PREFIXES and not (
            self.quote or self.indent or self.prompt_lines or self.wrap_width
        )

    @property
    def host(self) -> str | None:
        """The one host the envelope names (a single pdsh host, a prompt's host), else None."""
        if len(self.hosts) == 1:
            return self.hosts[0]
        return self.prompt_host if not self.hosts else None

    def describe(self) -> str:
        parts = [
            "quoted with `> `" if self.quote else "",
            f"indented by {len(self.indent)}" if self.indent else "",
            f"behind a prompt (`{self.command}`)" if self.command else ("behind a prompt" if self.prompt_lines else ""),
            f"prefixed ({self.prefix})" if self.prefix else "",
            f"wrapped at {self.wrap_width} columns" if self.wrap_width else "",
        ]
        return ", ".join(p for p in parts if p)


def _strip_quote(lines: list[str]) -> tuple[bool, list[str]]:
    filled = [line for line in lines if line.strip()]
    if len(filled) >= MIN_LINES and all(line.startswith(">") for line in filled):
        return True, [re.sub(r"^> ?", "", line) for line in lines]
    return False, lines


def _common_indent(lines: list[str]) -> str:
    filled = [line for line in lines if line.strip()]
    if len(filled) < MIN_LINES:
        return ""
    lead = [line[: len(line) - len(line.lstrip(" \t"))] for line in filled]
    common = lead[0]
    for s in lead[1:]:
        while not s.startswith(common):
            common = common[:-1]
    return common if ("\t" in common or len(common) >= 2) else ""


def _prompt(line: str) -> re.Match[str] | None:
    m = PROMPT.match(line)
    if m and m.group("bare") == "#" and not BARE_HASH_COMMAND.match(m.group("cmd") or ""):
        return None
    if m and m.group("bare") and not m.group("cmd"):  # a lone `$`/`#` is a prompt only at the very end
        return m if line.strip() in ("$", "#") else None
    return m


def _prompts(lines: list[str]) -> tuple[tuple[int, ...], str | None, int, str | None]:  # noqa: C901
    """(prompt line numbers, echoed command, its line, the prompt's host): the first non-blank line when it
    is a prompt with its command, and a last line that is a bare prompt waiting for the next command."""
    found: list[int] = []
    command, command_line, host = None, 0, None
    filled = [i for i, line in enumerate(lines) if line.strip()]
    if len(filled) < MIN_LINES:
        return (), None, 0, None
    first = _prompt(lines[filled[0]])
    if first and first.group("cmd"):
        found.append(filled[0] + 1)
        command, command_line = first.group("cmd"), filled[0] + 1
        host = first.group("host") or first.group("bhost")
    last = _prompt(lines[filled[-1]])
    if last and not last.group("cmd") and filled[-1] + 1 not in found:
        found.append(filled[-1] + 1)
        host = host or last.group("host") or last.group("bhost")
    return tuple(found), command, command_line, host


def _prefix(lines: list[str]) -> tuple[str | None, tuple[str, ...]]:
    filled = [line for line in lines if line.strip()]
    if len(filled) < MIN_LINES:
        return None, ()
    for p in PREFIXES:
        rx = re.compile(p.pattern)
        matched = [m for m in map(rx.match, filled) if m]
        fit = LINE_FIT if p.kind in LINE_PREFIXES and rx.match(filled[0]) else FIT
        if len(matched) < max(MIN_LINES, fit * len(filled)):
            continue
        if p.kind in ("host", "host_bracket"):
            seen = Counter(m.group("host") for m in matched)
            if seen.keys() & NOT_HOSTS or len(seen) > max(4, len(matched) // 5):
                continue
        hosts = tuple(sorted({m.group("host") for m in matched if "host" in rx.groupindex and m.group("host")}))
        return p.kind, hosts
    return None, ()


def _wrap_width(lines: list[str]) -> int:
    """A terminal's width the text was cut at: the longest length, shared by 3 or more lines whose next
    line does not start like them (a cut record goes on, a new record starts as the others do) and which do
    not end a sentence (a cut falls inside a word). A line ending in a blank was padded to the width, not cut (a
    progress printer's fixed-width lines)."""
    lengths = Counter(len(line) for line in lines if line.strip() and not line[-1].isspace())
    if not lengths:
        return 0
    width = max(lengths)
    if width < WRAP_MIN or lengths[width] < 3:
        return 0
    cut = [i for i, line in enumerate(lines[:-1]) if len(line) == width and not line[-1].isspace()]
    # a terminal cuts anywhere, mostly inside a word: lines of the same length that end a sentence are whole records
    # that happen to be as long as each other (NeMo's `… (…-last.ckpt) finalized successfully.` for steps of as
    # many digits), whose next line is the next record
    if sum(lines[i][-1] in ".!?)]" for i in cut) * 2 > len(cut):
        return 0
    starts = Counter(lines[i][:2] for i in cut)
    head2 = starts.most_common(1)[0][0]
    goes_on = sum(1 for i in cut if lines[i + 1].strip() and not lines[i + 1].startswith(head2))
    return width if goes_on >= max(3, len(cut) // 2) else 0


def detect(head: str) -> Envelope | None:
    """The envelope of a file from its decoded head, or None when its text is as the tool wrote it."""
    lines = head.splitlines()
    if len(lines) > 1 and not head.endswith("\n"):
        lines = lines[:-1]  # the head's last line may be cut at 64 KiB
    quote, lines = _strip_quote(lines)
    indent = _common_indent(lines)
    if indent:
        lines = [line[len(indent) :] if line.startswith(indent) else line.lstrip(" \t") for line in lines]
    prompts, command, command_line, prompt_host = _prompts(lines)
    body = [line if i + 1 not in prompts else "" for i, line in enumerate(lines)]
    prefix, hosts = _prefix(body)
    width = _wrap_width(body) if prefix not in ("cri", "docker_json") else 0
    text = lines[command_line - 1] if command_line else ""
    env = Envelope(quote, indent, prompts, command, command_line, text, prompt_host, prefix, width, hosts)
    return env if env else None


def continued_sql() -> str:
    """A SQL condition on `prev` (the previous line's body): its record is known to go on in this line."""
    terms = [
        f"(contains(prev, '{start}') AND NOT contains(prev, '{end}'))"  # literals of this module: no user input
        for start, end in CONTINUED
    ]
    return "(" + " OR ".join(terms) + ")"
