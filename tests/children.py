"""Child processes the tests signal as a user would."""

from __future__ import annotations

import signal


def default_sigint() -> None:
    """Popen's preexec_fn: SIGINT at its default in the child, as at a terminal. A suite started as a
    shell's background job (`pytest &`, `nohup .ci/run &`) has SIGINT ignored, an ignored SIGINT is
    inherited, and Python then installs no Ctrl-C handler: the command rightly keeps ignoring it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
