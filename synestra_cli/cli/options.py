"""The grammar every command shares: `--format` (with `--json` kept as a hidden alias), one UTC time
type for `--since/--until/--at`, `--job` and `--host` repeatable and comma-separated, and one way of
refusing options that do not go together. A command declares its options with these decorators, so
that a script written against one command works the same way against the next."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
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


class UTCTime(click.ParamType):  # type: ignore[type-arg]
    """--since, --until, --at: one type for every command (parse_time)."""

    name = "TIME"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> datetime:
        if isinstance(value, datetime):
            return value
        try:
            return parse_time(str(value))
        except (ValueError, OverflowError) as exc:
            self.fail(str(exc), param, ctx)


UTC_TIME = UTCTime()


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
    from synestra_cli.hostlist import HostlistError, expand

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
