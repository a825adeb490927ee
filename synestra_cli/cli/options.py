"""The grammar every command shares: `--format` (with `--json` kept as a hidden alias), one UTC time
type for `--since/--until/--at`, `--job` and `--host` repeatable and comma-separated, and one way of
refusing options that do not go together. A command declares its options with these decorators, so
that a script written against one command works the same way against the next."""

from __future__ import annotations

import functools
import math
import os
import re
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeAlias

import click

Decorator: TypeAlias = Callable[[Callable[..., Any]], Callable[..., Any]]

db_option = click.option(
    "--db",
    type=click.Path(path_type=str),  # a str: an s3:// URL or a trailing / (a lake) must survive
    default=None,
    help="Store file (default: $SYNESTRA_DB, else ./synestra.duckdb); a folder or s3:// URL is a lake (docs/lake.md).",
)

# `-24h`, `now-2d`, `now`, `now+30m`: relative to the wall clock, in seconds to weeks.
_RELATIVE = re.compile(r"^(?:now)?\s*(?:([+-])\s*(\d+(?:\.\d+)?)\s*([smhdw]))?$", re.IGNORECASE)
_AGO = re.compile(r"^\d+(?:\.\d+)?\s*[smhdw]$", re.IGNORECASE)  # `24h`, `30m`, `7d`: ago
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
TIME_HELP = "UTC unless it carries a zone; ISO 8601 as the JSON outputs write it, or relative: 24h, -24h, now-2d"


def utc_now() -> datetime:
    """Now, as a naive UTC datetime like every time in the store."""
    return datetime.now(UTC).replace(tzinfo=None)


def parse_time(text: str, now: datetime | None = None) -> datetime:
    """A time as a user writes it, as a naive UTC datetime (the store's times are naive UTC).

    ISO 8601 with `T` or a space, fractional seconds, `Z` or an offset (`+02:00` is converted to UTC),
    a date alone (midnight UTC), or a time relative to now (`now`, `-24h`, `now-2d`, `now+30m`).
    ValueError otherwise."""
    text = text.strip()
    if _AGO.match(text):  # `--since 24h`, as kubectl and journalctl users type it: that long ago
        text = "-" + text
    m = _RELATIVE.match(text) if text and (text[0] in "+-" or text.lower().startswith("now")) else None
    if m:
        base = now or utc_now()
        if not m.group(1):
            return base
        delta = timedelta(seconds=float(m.group(2)) * _UNIT_S[m.group(3).lower()])
        return base + delta if m.group(1) == "+" else base - delta
    try:
        t = datetime.fromisoformat(text.replace("z", "Z"))
    except ValueError as exc:
        raise ValueError(
            f"{text!r} is not a time: write 2026-11-03T00:00:00Z, 2026-11-03 02:00:00+02:00, 2026-11-03, "
            "24h, -24h or now-2d"
        ) from exc
    return t.astimezone(UTC).replace(tzinfo=None) if t.tzinfo else t


def show_time(t: datetime) -> str:
    """A naive UTC time as the JSON outputs write it (what parse_time reads back)."""
    return t.strftime("%Y-%m-%dT%H:%M:%S") + (f".{t.microsecond // 1000:03d}" if t.microsecond else "") + "Z"


# The times an option may name: far enough inside years 1-9999 (all a store holds) that every window a
# command computes around one (risks' --history-hours, explain's look-back, a day each side of a lake
# job's scope) is still a time; `--at 0001-01-01` minus a week was an OverflowError.
TIME_MIN = datetime(1000, 1, 1)
TIME_MAX = datetime(9000, 12, 31, 23, 59, 59)


class UTCTime(click.ParamType):  # type: ignore[type-arg]
    """--since, --until, --at: one type for every command (parse_time), from TIME_MIN to TIME_MAX."""

    name = "TIME"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> datetime:
        if isinstance(value, datetime):
            return value
        try:
            t = parse_time(str(value))
        except (ValueError, OverflowError) as exc:
            self.fail(str(exc), param, ctx)
        if not TIME_MIN <= t <= TIME_MAX:
            span = f"{TIME_MIN:%Y-%m-%d} to {TIME_MAX:%Y-%m-%d}"
            self.fail(f"{str(value)!r} is out of range: give a time from {span}", param, ctx)
        return t


UTC_TIME = UTCTime()


class _Finite:
    """What every numeric option's type adds to click's ranges: NaN and infinities refused (click's
    FloatRange lets NaN through, and `inf` passes a range without a maximum), and the refusal naming the
    range and the unit (exit 2), once, before the command does anything. The help shows the range."""

    lo: float
    hi: float
    unit: str

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        text = str(value).strip()
        try:
            x = super().convert(value, param, ctx)  # type: ignore[misc]
        except click.BadParameter:
            x = None
        if x is None or (isinstance(x, float) and not math.isfinite(x)):
            whole = isinstance(self, click.IntRange)
            try:
                number = float(text)
            except ValueError:
                self.fail(f"{text!r} is not a {'whole ' if whole else ''}number", param, ctx)  # type: ignore[attr-defined]
            if whole and math.isfinite(number) and self.lo <= number <= self.hi:
                self.fail(f"{text!r} is not a whole number", param, ctx)  # type: ignore[attr-defined]
            self.fail(f"{text!r} is out of range: expected {self.range_text()}", param, ctx)  # type: ignore[attr-defined]
        return x

    def range_text(self) -> str:
        lo, hi = (f"{v:,}" if isinstance(v, int) else f"{v:,g}" for v in (self.lo, self.hi))
        return f"{lo} to {hi}" + (f" {self.unit}" if self.unit else "")


class _FiniteFloat(_Finite, click.FloatRange):
    pass


class _FiniteInt(_Finite, click.IntRange):
    pass


def Number(lo: float, hi: float, unit: str = "", integer: bool = False) -> click.ParamType[Any]:  # noqa: N802
    """Every numeric option's type: a finite number from `lo` to `hi`, in `unit`, whole when `integer`."""
    kind = _FiniteInt(int(lo), int(hi)) if integer else _FiniteFloat(lo, hi)
    kind.lo, kind.hi = (int(lo), int(hi)) if integer else (lo, hi)
    kind.unit = unit
    return kind


# The numeric options' ranges, in one place (README.md, "Usage errors"; tests/test_reliability_cli.py
# tries each with nan, inf, 1e308 and -1).
GPU_HOUR_PRICE = Number(0, 10_000, "USD per GPU-hour")  # a B200 rents for ~$10; $inf printed "$inf"
CAPACITY_GPUS = Number(1, 10**7, "GPUs", integer=True)
TAX_FAIL_OVER = Number(0, 100, "percent")
RISK_FAIL_OVER = Number(0, 10**9, "components", integer=True)
HISTORY_HOURS = Number(0, 24 * 365 * 10, "hours")  # ten years
POLL_INTERVAL = Number(0.1, 3600, "seconds")
MAX_POLLS = Number(1, 10**9, "polls", integer=True)
YEAR = Number(1, 9999, integer=True)
ITERATION = Number(0, 2**63 - 1, integer=True)
TOP = Number(1, 10**9, "rows", integer=True)
RETAIN_S = Number(0, 10**9, "seconds", integer=True)
SEED = Number(0, 2**32 - 1, integer=True)


def check_window(since: datetime | None, until: datetime | None) -> None:
    """--since after --until is a window that holds nothing: a usage error, not an empty answer."""
    if since is not None and until is not None and since > until:
        message = f"--since {show_time(since)} is after --until {show_time(until)}"
        raise click.BadParameter(message, param_hint="'--since'")


def window_options(what: str) -> Decorator:
    """--since and --until (UTC_TIME), refused when --since is after --until."""

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def checked(*args: Any, **kwargs: Any) -> Any:
            check_window(kwargs.get("since"), kwargs.get("until"))
            return fn(*args, **kwargs)

        checked = click.option("--until", type=UTC_TIME, help=f"Only {what} up to this time.")(checked)
        return click.option("--since", type=UTC_TIME, help=f"Only {what} from this time ({TIME_HELP}).")(checked)

    return decorate


def _split(values: Iterable[str]) -> tuple[str, ...]:
    """`--job 1003 --job 1004,1005` -> ('1003', '1004', '1005'), each once, in the order given."""
    out = [v.strip() for value in values for v in value.split(",")]
    if any(not v for v in out):
        raise click.BadParameter("an empty name in the list")
    return tuple(dict.fromkeys(out))


def _jobs_callback(ctx: click.Context, param: click.Parameter, value: Sequence[str]) -> tuple[str, ...]:
    return _split(value)


def _hosts_callback(ctx: click.Context, param: click.Parameter, value: Sequence[str]) -> tuple[str, ...]:
    from synestra_cli.api.shared import HostlistError, expand

    try:
        return tuple(dict.fromkeys(h for v in value for h in expand(v)))
    except HostlistError as exc:
        raise click.BadParameter(str(exc)) from exc


JOB_HELP = "Job id, as `synestra jobs` lists it; repeat it or separate ids with commas."


def job_option(text: str = JOB_HELP) -> Decorator:
    return click.option("--job", "jobs", multiple=True, metavar="ID[,ID...]", callback=_jobs_callback, help=text)


def host_option(what: str = "jobs") -> Decorator:
    return click.option(
        "--host",
        "hosts",
        multiple=True,
        metavar="HOST[,HOST...]",
        callback=_hosts_callback,
        help=f"Only {what} that ran on one of these hosts (repeatable; a Slurm hostlist like gpu-[001-004] too).",
    )


def format_option(*choices: str, default: str = "table", json_alias: bool = False) -> Decorator:
    """--format CHOICE; with json_alias, the older `--json` flag too (hidden), meaning --format json."""

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        if json_alias:

            @functools.wraps(fn)
            def aliased(*args: Any, as_json: bool = False, **kwargs: Any) -> Any:
                if as_json:
                    fmt_source = click.get_current_context().get_parameter_source("fmt")
                    if fmt_source is click.core.ParameterSource.COMMANDLINE and kwargs["fmt"] != "json":
                        refuse_together({"--json": True, f"--format {kwargs['fmt']}": True})
                    kwargs["fmt"] = "json"
                return fn(*args, **kwargs)

            target = click.option("--json", "as_json", is_flag=True, hidden=True, help="Same as --format json.")(
                aliased
            )
        else:
            target = fn  # type: ignore[assignment]
        return click.option(
            "--format",
            "fmt",
            type=click.Choice(choices),
            default=default,
            show_default=True,
            help="Output format.",
        )(target)

    return decorate


def refuse_together(given: dict[str, Any]) -> None:
    """Options that contradict each other: one message, exit 2, wherever they are given together."""
    named = [name for name, value in given.items() if value not in (None, False, (), [])]
    if len(named) > 1:
        raise click.UsageError(f"{' and '.join(named)} cannot be used together: give one of them")


def require_one(given: dict[str, Any]) -> None:
    """Exactly one of these options (e.g. --job or --all), refused the same way everywhere."""
    refuse_together(given)
    if all(value in (None, False, (), []) for value in given.values()):
        raise click.UsageError(f"give one of {' or '.join(given)}")


class OutputPath(click.ParamType):  # type: ignore[type-arg]
    """A file a command writes (`timeline -o`), or with `folder` a folder it fills (`simulate OUTDIR`):
    refused before any work when it cannot be (a folder where a file goes, or a file or device where a
    folder goes, a folder above it that is missing or not writable). A write that fails later (a full
    disk) is the command's one line too (cli/common.py output_file)."""

    name = "PATH"

    def __init__(self, folder: bool = False) -> None:
        self.folder = folder

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Path:
        path = Path(value)
        if path.exists() or path.is_symlink():
            if self.folder and not path.is_dir():
                self.fail(f"{path}: not a folder (a file or device is there)", param, ctx)
            if not self.folder and path.is_dir():
                self.fail(f"{path}: is a folder: give a file name in it", param, ctx)
            if not os.access(path, os.W_OK):
                self.fail(f"{path}: not writable", param, ctx)
            return path
        parent = path.parent
        base = next((p for p in (parent, *parent.parents) if p.exists()), Path("."))
        if not self.folder and base != parent:
            self.fail(f"{path}: its folder {parent} does not exist", param, ctx)
        if not base.is_dir():
            self.fail(f"{path}: {base} is not a folder", param, ctx)
        if not os.access(base, os.W_OK | os.X_OK):
            self.fail(f"{path}: folder {base} is not writable", param, ctx)
        return path


OUTPUT_FILE = OutputPath()
OUTPUT_FOLDER = OutputPath(folder=True)
