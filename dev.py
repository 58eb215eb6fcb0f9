#!/usr/bin/env python3
"""The project's two commands, runnable with nothing but Python 3.11+.

    python3 dev.py run     # set up, start embedded services, migrate, seed demo, serve web + worker
    python3 dev.py test    # set up what tests need and run the whole suite (ruff first)
    python3 dev.py stop    # stop the embedded PostgreSQL and Redis
    python3 dev.py lock    # re-pin every dependency in requirements.lock (after changing pyproject.toml)

Both create `.venv` next to this file when it is missing and install the project into it,
then re-run themselves inside it.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = Path(os.environ.get("OPENCOMPANY_VENV", ROOT / ".venv"))
VENV_PYTHON = VENV / "bin" / "python"
CHROMIUM = "/usr/bin/chromium"
LOCK = ROOT / "requirements.lock"
# The extras the lock covers: everything `run` and `test` install.
LOCK_EXTRAS = "test"
LOCK_STAMP_PREFIX = "# pyproject-sha256: "
# Test processes `test` runs side by side: the suite waits on browsers, workers and servers much of the time, so two
# processes keep this project's 2-core machines busy; OPENCOMPANY_TEST_PROCESSES overrides it (1: one process).
DEFAULT_TEST_PROCESSES = 2


def _in_venv() -> bool:
    return Path(sys.prefix).resolve() == VENV.resolve()


def _install_stamp(extras: str) -> Path:
    lock = LOCK.read_bytes() if LOCK.exists() else b""
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + lock + extras.encode()).hexdigest()[:16]
    return VENV / f".opencompany-installed-{digest}"


def _declared_dependencies(pyproject: Path) -> dict:
    """What the lock is made from: the project's dependencies, its extras and the Python it needs (the rest of
    pyproject.toml, such as pytest's or ruff's settings, changes no pin)."""
    import tomllib

    project = tomllib.loads(pyproject.read_text()).get("project", {})
    return {
        "requires-python": project.get("requires-python", ""),
        "dependencies": sorted(project.get("dependencies", [])),
        "optional-dependencies": {k: sorted(v) for k, v in sorted(project.get("optional-dependencies", {}).items())},
    }


def _pyproject_digest(pyproject: Path = ROOT / "pyproject.toml") -> str:
    import json

    return hashlib.sha256(json.dumps(_declared_dependencies(pyproject), sort_keys=True).encode()).hexdigest()


def lock_problems(pyproject: Path = ROOT / "pyproject.toml", lock: Path = LOCK) -> list[str]:
    """Why `lock` does not match `pyproject` (empty when it does): it was made from other declarations, or a
    dependency the project declares is missing from it or pinned outside the declared range."""
    if not lock.exists():
        return [f"{lock.name} is missing"]
    text = lock.read_text()
    stamps = [
        line.removeprefix(LOCK_STAMP_PREFIX).strip() for line in text.splitlines() if line.startswith(LOCK_STAMP_PREFIX)
    ]
    problems = []
    if stamps != [_pyproject_digest(pyproject)]:
        problems.append(f"{lock.name} was made from other dependencies than {pyproject.name} declares")
    try:
        from packaging.requirements import Requirement
        from packaging.utils import canonicalize_name
    except ImportError:  # not a dependency of the project: pip's own copy does the same
        from pip._vendor.packaging.requirements import Requirement
        from pip._vendor.packaging.utils import canonicalize_name
    pins = {}
    for line in text.splitlines():
        if "==" in line and not line.startswith((" ", "#")):
            name, _, version = line.split(" ", 1)[0].partition("==")
            pins[canonicalize_name(name)] = version
    declared = _declared_dependencies(pyproject)
    wanted = [*declared["dependencies"], *declared["optional-dependencies"].get(LOCK_EXTRAS, [])]
    for spec in wanted:
        requirement = Requirement(spec)
        name = canonicalize_name(requirement.name)
        if name == canonicalize_name("opencompany"):
            continue  # an extra naming the project's own other extras
        if name not in pins:
            problems.append(f"{requirement.name} is declared but not pinned in {lock.name}")
        elif not requirement.specifier.contains(pins[name], prereleases=True):
            problems.append(f"{requirement.name}=={pins[name]} in {lock.name} is outside {requirement.specifier}")
    return problems


def _lock_is_current() -> bool:
    return not lock_problems()


def _ensure_venv(extras: str) -> None:
    if not VENV_PYTHON.exists():
        print(f"Creating virtualenv in {VENV}", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    stamp = _install_stamp(extras)
    if not stamp.exists():
        print("Installing the project and its dependencies (first run only)", flush=True)
        target = f".[{extras}]" if extras else "."
        pip = [str(VENV_PYTHON), "-m", "pip", "install", "-q"]
        subprocess.run([*pip, "--upgrade", "pip"], check=True, cwd=ROOT)
        # The pinned, hash-checked versions first; then the project itself, which adds only what the lock lacks.
        # A lock older than pyproject.toml (a dependency added since) still pins everything else.
        if LOCK.exists():
            if not _lock_is_current():
                print(
                    "requirements.lock is older than pyproject.toml: installing it, then what it lacks "
                    "(refresh it with `python3 dev.py lock`).",
                    flush=True,
                )
            locked = subprocess.run([*pip, "--require-hashes", "-r", str(LOCK)], cwd=ROOT)
            if locked.returncode != 0:
                print("Installing requirements.lock failed; installing from pyproject.toml instead.", flush=True)
        subprocess.run([*pip, "-e", target], check=True, cwd=ROOT)
        stamp.touch()


def cmd_lock() -> int:
    """Re-pin every dependency (with hashes) from pyproject.toml into requirements.lock, using pip-tools in a
    throwaway virtualenv (it is not a dependency of the project)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="opencompany-lock-") as folder:
        tools = Path(folder) / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(tools)], check=True)
        tool_python = str(tools / "bin" / "python")
        subprocess.run([tool_python, "-m", "pip", "install", "-q", "pip-tools>=7.4,<8"], check=True)
        output = Path(folder) / "requirements.lock"
        subprocess.run(
            [
                tool_python,
                "-m",
                "piptools",
                "compile",
                "--quiet",
                "--generate-hashes",
                "--strip-extras",
                "--allow-unsafe",
                f"--extra={LOCK_EXTRAS}",
                "--no-header",
                "--no-emit-index-url",
                "--no-emit-find-links",
                "--no-emit-trusted-host",
                "--output-file",
                str(output),
                str(ROOT / "pyproject.toml"),
            ],
            check=True,
            cwd=ROOT,
        )
        header = (
            "# Every dependency of OpenCompany (run + test), pinned with hashes. Made by `python3 dev.py lock` from\n"
            "# pyproject.toml; dev.py installs it before the project. Refresh it after changing dependencies.\n"
            f"{LOCK_STAMP_PREFIX}{_pyproject_digest()}\n"
        )
        LOCK.write_text(header + output.read_text())
    print(f"Wrote {LOCK}", flush=True)
    return 0


def _reexec_in_venv(extras: str) -> None:
    if _in_venv():
        return
    _ensure_venv(extras)
    os.execv(str(VENV_PYTHON), [str(VENV_PYTHON), str(ROOT / "dev.py"), *sys.argv[1:]])


def _manage(*args: str, env: dict | None = None) -> None:
    subprocess.run([sys.executable, str(ROOT / "manage.py"), *args], check=True, cwd=ROOT, env=env)


def _ensure_chromium() -> None:
    """Browser tests drive Debian's Chromium; install it when this machine can (root + apt)."""
    if Path(CHROMIUM).exists() or os.environ.get("OPENCOMPANY_SKIP_CHROMIUM_INSTALL") == "1":
        return
    if os.geteuid() != 0 or not Path("/usr/bin/apt-get").exists():
        print("Chromium is not installed; browser tests will be skipped with a reason.", flush=True)
        return
    print("Installing Chromium from Debian for the browser tests", flush=True)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=False, env=env)
    subprocess.run(["apt-get", "install", "-y", "-qq", "chromium", "chromium-driver"], check=False, env=env)


def cmd_run() -> int:
    _reexec_in_venv("")
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "opencompany.settings.base", "PYTHONUNBUFFERED": "1"}
    # Collected below: with DEBUG off pages name content-hashed files served with a year-long cache (with DEBUG on,
    # Django names the plain files, served with no-cache).
    env.setdefault("STATIC_HASHED", "1")
    host = os.environ.get("OPENCOMPANY_HOST", "127.0.0.1")
    port = os.environ.get("OPENCOMPANY_PORT", "8000")
    _manage("migrate", "--no-input", env=env)
    _manage("collectstatic", "--no-input", "-v", "0", env=env)
    _manage("seed_demo", env=env)
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "daphne", "-b", host, "-p", port, "opencompany.asgi:application"], cwd=ROOT, env=env
        ),
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "opencompany",
                "worker",
                "-B",
                "-Q",
                "agent,housekeeping",
                "--concurrency",
                os.environ.get("OPENCOMPANY_WORKER_CONCURRENCY", "4"),
                "--loglevel",
                "INFO",
                "-s",
                str(Path(env.get("OPENCOMPANY_DATA_DIR") or ROOT / ".data") / "celerybeat-schedule"),
            ],
            cwd=ROOT,
            env=env,
        ),
    ]
    url = f"http://{host}:{port}/"
    _wait_healthy(url + "healthz", processes)
    print(
        f"\n  OpenCompany is running at {url}\n"
        "  Log in as the demo owner (see the password above). Ctrl-C stops everything.\n",
        flush=True,
    )

    def _stop(*_args):
        for process in processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
        if not os.environ.get("DATABASE_URL") or not os.environ.get("REDIS_URL"):
            from core import embedded

            embedded.stop_all()
        sys.exit(0)

    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)
    embedded_postgres, embedded_redis = not os.environ.get("DATABASE_URL"), not os.environ.get("REDIS_URL")
    next_look = time.monotonic() + REVIVE_EVERY_SECONDS
    while all(p.poll() is None for p in processes):
        time.sleep(0.5)
        if (embedded_postgres or embedded_redis) and time.monotonic() >= next_look:
            _revive_embedded(postgres=embedded_postgres, redis=embedded_redis)
            next_look = time.monotonic() + REVIVE_EVERY_SECONDS
    print("A server process exited; stopping the rest.", flush=True)
    _stop()
    return 1


# How often `dev.py run` looks at the embedded servers (core/embedded/revival.py).
REVIVE_EVERY_SECONDS = 5


def _revive_embedded(*, postgres: bool, redis: bool) -> None:
    """An embedded server that died or is shutting down is started again on its port, and the console says so."""
    from core.embedded.revival import revive

    try:
        for line in revive(postgres=postgres, redis=redis):
            print(line, flush=True)
    except Exception as exc:  # keep serving; the next look tries again
        print(f"Could not restart an embedded server ({type(exc).__name__}: {exc}); trying again.", flush=True)


def _wait_healthy(url: str, processes: list, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p in processes):
            return
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except Exception:  # refused or 503 while the worker starts: keep waiting
            time.sleep(0.5)
            continue
        time.sleep(0.5)


def cmd_test() -> int:
    _reexec_in_venv("test")
    if problems := lock_problems():
        print(
            "requirements.lock does not match pyproject.toml:\n  "
            + "\n  ".join(problems)
            + "\nRefresh it with `python3 dev.py lock` and commit it.",
            flush=True,
        )
        return 1
    _ensure_chromium()
    lint = subprocess.run([sys.executable, "-m", "ruff", "check", "."], cwd=ROOT)
    fmt = subprocess.run([sys.executable, "-m", "ruff", "format", "--check", "."], cwd=ROOT)
    if lint.returncode or fmt.returncode:
        print("ruff found problems (run: .venv/bin/ruff check --fix . && .venv/bin/ruff format .)", flush=True)
        return 1
    args = sys.argv[2:]
    # Test processes side by side (pytest-xdist), each with its own database and Redis database
    # (opencompany/settings/test.py); a file's tests stay in one process, so a module's shared server starts once.
    processes = os.environ.get("OPENCOMPANY_TEST_PROCESSES", str(DEFAULT_TEST_PROCESSES))
    parallel = (
        []
        if processes in ("0", "1") or any(a == "-n" or a.startswith("-n") for a in args)
        else [
            "-n",
            processes,
            "--dist",
            "loadfile",
        ]
    )
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "pytest", *parallel, *args], cwd=ROOT)
    minutes, seconds = divmod(round(time.monotonic() - started), 60)
    print(f"The test suite took {minutes} min {seconds} s ({processes} test processes).", flush=True)
    if result.returncode == 5:
        print("pytest collected no tests: that is a failure here.", flush=True)
        return 1
    return result.returncode


def cmd_stop() -> int:
    _reexec_in_venv("")
    from core import embedded

    embedded.stop_all()
    return 0


def main() -> int:
    commands = {"run": cmd_run, "test": cmd_test, "stop": cmd_stop, "lock": cmd_lock}
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        print(__doc__)
        return 2
    return commands[sys.argv[1]]()


if __name__ == "__main__":
    sys.exit(main())
