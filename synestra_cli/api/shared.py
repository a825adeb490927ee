"""What the command line shares with the library besides answers: errors and their exit codes, how values
are shown, hostlists, settings, progress and the version. Re-exported here so that the CLI's only door
into the library is `synestra_cli.api` (the import contract in pyproject.toml). Light: no DuckDB."""

from synestra_cli import __version__, progress, settings
from synestra_cli.errors import (
    MEMORY_ADVICE,
    EmptyStoreError,
    ExitCode,
    InputError,
    NotFoundError,
    SynestraError,
    Terminated,
    exit_code_for,
    forget_stop,
    in_chain,
    is_interrupt,
    is_out_of_memory,
    out_of_memory_message,
    raise_if_stopped,
    request_stop,
)
from synestra_cli.hostlist import HostlistError, expand
from synestra_cli.shown import iso, path, plural, relative_in

__all__ = [
    "MEMORY_ADVICE",
    "EmptyStoreError",
    "ExitCode",
    "HostlistError",
    "InputError",
    "NotFoundError",
    "SynestraError",
    "Terminated",
    "__version__",
    "exit_code_for",
    "expand",
    "forget_stop",
    "in_chain",
    "is_interrupt",
    "is_out_of_memory",
    "iso",
    "out_of_memory_message",
    "path",
    "plural",
    "progress",
    "raise_if_stopped",
    "relative_in",
    "request_stop",
    "settings",
]
