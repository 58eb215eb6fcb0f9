"""What the runtimes' CLI processes may see and how they end.

The SDKs start their CLI with the parent's whole environment; a wrapper script in between replaces it with the
names the run needs (their values are read from the SDK's environment, never written to disk), starts the CLI in
its own session (so its process group is its pid) and records that pid, so Stop and the wall-clock limit kill the
CLI and everything it started.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import stat
from pathlib import Path

BASE_NAMES = ("LANG",)
SETPRIV = "/usr/bin/setpriv"


def die_with_parent() -> list[str]:
    """argv prefix that SIGKILLs the CLI when the worker that started it dies (a lost worker must not leave a
    runtime running on its own); empty where util-linux's setpriv is missing."""
    return [SETPRIV, "--pdeathsig", "KILL"] if os.path.exists(SETPRIV) else []


def clean_env_launcher(directory: Path, binary: str, names: list[str], fixed: dict[str, str]) -> Path:
    """Write `directory/launch` that runs `binary "$@"` with only `names` (from its own environment) and `fixed`."""
    pairs = [f'{name}="${{{name}-}}"' for name in [*BASE_NAMES, *names]]
    pairs += [f"{name}={shlex.quote(value)}" for name, value in fixed.items()]
    pid_file = directory / "pid"
    script = (
        "#!/bin/sh\n"
        f"echo $$ > {shlex.quote(str(pid_file))}\n"
        # setsid(1) from a process that is not a group leader calls setsid() and execs in place: same pid, which
        # is now its own process group.
        f"exec /usr/bin/setsid {' '.join(die_with_parent())} /usr/bin/env -i {' '.join(pairs)} "
        f'{shlex.quote(binary)} "$@"\n'
    )
    launcher = directory / "launch"
    launcher.write_text(script)
    launcher.chmod(stat.S_IRWXU)
    return launcher


def kill_group(directory: Path) -> bool:
    """SIGKILL the process group the launcher in `directory` started; True when there was one to kill."""
    try:
        pid = int((directory / "pid").read_text().strip())
    except (OSError, ValueError):
        return False
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False
    return True


def group_alive(directory: Path) -> bool:
    try:
        pid = int((directory / "pid").read_text().strip())
    except (OSError, ValueError):
        return False
    try:
        os.killpg(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    with contextlib.suppress(OSError):
        # A zombie still has a group id until reaped; count it as gone.
        if Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z"):
            return False
    return True
