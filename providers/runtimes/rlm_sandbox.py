"""The RLM child process: runs one `rlm.RLM(...).completion()` inside a sandbox and reports it as JSON lines.

Started by providers/runtimes/rlm.py as `python -I rlm_sandbox.py` (isolated mode: no PYTHON* variables, no user
site, not this directory on sys.path), so it imports nothing of OpenCompany: only the standard library and `rlm`.
The RLM's "local" REPL `exec`s the model's code in this process, so everything after `arm()` treats this process as
hostile. Before the first model call it:

- lowers its own resource limits (CPU seconds, address space, open files, file size, no core dumps);
- brings up the loopback of the network namespace it was started in (`unshare --net`, when the OS allowed it), the
  only interface there, which the RLM's REPL uses to reach its in-process LM handler;
- restricts its filesystem with Landlock when the kernel has it: read-only the Python installation and its
  packages, read-write only its own working directory; on ABI 6+ it may not signal processes outside itself;
- sets no_new_privs, and installs an audit hook that refuses, from then on, file access outside the working
  directory, directory listings elsewhere, processes, signals, ctypes, raw sockets to anything but loopback and
  changes to its own limits.

It holds no API key and makes no HTTP call: every model call (the root's iterations, `llm_query`, sub-RLMs) is a
request on the channel that the parent answers (the parent calls the backend with the owner's key). The project's
tools (memory, todos) are REPL functions that do the same. Channel: this process writes one JSON object per line to
fd 3 and reads the parent's answers, one JSON object per line, from stdin.
"""

from __future__ import annotations

import json
import os
import sys
import threading

CHANNEL_FD = 3
_out_lock = threading.Lock()
_channel = None  # set in main()
_waiting: dict[int, dict] = {}
_waiting_cv = threading.Condition()
_next_id = [0]
_state = threading.local()  # value: this thread runs the root RLM's turn; in_cell: it runs one of its cells


def send(event: dict) -> None:
    line = json.dumps(event, ensure_ascii=False, default=str) + "\n"
    with _out_lock:
        _channel.write(line)
        _channel.flush()


def request(event: dict) -> dict:
    """Send a request to the parent and wait for its answer (matched by id)."""
    with _waiting_cv:
        _next_id[0] += 1
        request_id = _next_id[0]
    send({**event, "id": request_id})
    with _waiting_cv:
        while request_id not in _waiting:
            if not _waiting_cv.wait(timeout=600):
                raise RuntimeError("the parent did not answer")
        return _waiting.pop(request_id)


def _read_answers() -> None:
    for line in sys.stdin:
        try:
            answer = json.loads(line)
        except ValueError:
            continue
        with _waiting_cv:
            _waiting[int(answer.get("id", 0))] = answer
            _waiting_cv.notify_all()
    os._exit(3)  # the parent is gone: nothing left to report to


# --- limits --------------------------------------------------------------------------------------------------


def apply_rlimits(limits: dict) -> dict:
    import resource

    applied = {}
    pairs = {
        "cpu_seconds": resource.RLIMIT_CPU,
        "memory_bytes": resource.RLIMIT_AS,
        "open_files": resource.RLIMIT_NOFILE,
        "file_bytes": resource.RLIMIT_FSIZE,
        "core_bytes": resource.RLIMIT_CORE,
    }
    for name, which in pairs.items():
        value = limits.get(name)
        if value is None:
            continue
        value = int(value)
        # Soft and hard (almost) the same: the program cannot raise its own limit back. CPU: one second between
        # them, so the soft limit's SIGXCPU ends the run and tells the parent why (the hard one is a bare SIGKILL).
        resource.setrlimit(which, (value, value + 1 if which == resource.RLIMIT_CPU else value))
        applied[name] = value
    return applied


def loopback_up() -> bool:
    """Bring `lo` up in a fresh network namespace (it starts down); False when not permitted or not needed."""
    import fcntl
    import socket
    import struct

    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            request_bytes = struct.pack("16sH14s", b"lo", 0, b"")
            flags = struct.unpack("16sH14s", fcntl.ioctl(sock, siocgifflags, request_bytes))[1]
            if flags & iff_up:
                return True
            fcntl.ioctl(sock, siocsifflags, struct.pack("16sH14s", b"lo", flags | iff_up, b""))
        return True
    except OSError:
        return False


def only_loopback() -> bool:
    """True when this process sees no network interface but loopback (it runs in its own network namespace)."""
    try:
        return {name for _, name in __import__("socket").if_nameindex()} <= {"lo"}
    except OSError:
        return False


# --- Landlock ------------------------------------------------------------------------------------------------

_SYS_CREATE, _SYS_ADD_RULE, _SYS_RESTRICT = 444, 445, 446  # the same numbers on x86_64 and arm64
_FS_EXECUTE, _FS_WRITE_FILE, _FS_READ_FILE, _FS_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3


def _fs_handled(abi: int) -> int:
    handled = (1 << 13) - 1  # ABI 1: execute .. make_sym
    if abi >= 2:
        handled |= 1 << 13  # refer
    if abi >= 3:
        handled |= 1 << 14  # truncate
    if abi >= 5:
        handled |= 1 << 15  # ioctl_dev
    return handled


def landlock(read_only: list[str], read_write: list[str]) -> int:
    """Restrict this process's filesystem to the given trees; returns the Landlock ABI used (0: unavailable)."""
    import ctypes
    import struct

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    abi = libc.syscall(_SYS_CREATE, None, ctypes.c_size_t(0), ctypes.c_uint32(1))  # LANDLOCK_CREATE_RULESET_VERSION
    if abi <= 0:
        return 0
    handled = _fs_handled(abi)
    if abi >= 6:
        # handled_access_fs, handled_access_net (none: the network is the namespace's business), scoped:
        # abstract unix sockets and signals outside this domain.
        attr = struct.pack("=QQQ", handled, 0, 0b11)
    elif abi >= 4:
        attr = struct.pack("=QQ", handled, 0)
    else:
        attr = struct.pack("=Q", handled)
    buffer = ctypes.create_string_buffer(attr, len(attr))
    ruleset = libc.syscall(_SYS_CREATE, buffer, ctypes.c_size_t(len(attr)), ctypes.c_uint32(0))
    if ruleset < 0:
        return 0
    try:
        # No execute right anywhere: this process is already running and its libraries load by reading them, so no
        # program can be started from the sandbox at all (the audit hook misses some ways to try).
        read_write_no_exec = handled & ~_FS_EXECUTE
        for paths, access in ((read_only, _FS_READ_FILE | _FS_READ_DIR), (read_write, read_write_no_exec)):
            for path in paths:
                try:
                    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
                except OSError:
                    continue
                try:
                    allowed = access
                    if not os.path.isdir(path):
                        allowed &= _FS_WRITE_FILE | _FS_READ_FILE | (1 << 14)  # the rights a file can have
                    rule = ctypes.create_string_buffer(struct.pack("=Qi", allowed & handled, fd), 12)
                    if libc.syscall(_SYS_ADD_RULE, ruleset, 1, rule, ctypes.c_uint32(0)) < 0:
                        raise OSError(ctypes.get_errno(), f"landlock_add_rule {path}")
                finally:
                    os.close(fd)
        if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS, required before restricting oneself
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
        if libc.syscall(_SYS_RESTRICT, ruleset, ctypes.c_uint32(0)) < 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self")
    finally:
        os.close(ruleset)
    return abi


# --- the audit hook ------------------------------------------------------------------------------------------

_DENIED_EVENTS = (
    "os.system",
    "os.exec",
    "os.posix_spawn",
    "os.spawn",
    "os.fork",
    "os.forkpty",
    "os.kill",
    "os.killpg",
    "os.chroot",
    "subprocess.Popen",
    "pty.spawn",
    "signal.pthread_kill",
    "resource.setrlimit",
    "resource.prlimit",
    "fcntl.ioctl",
    "gc.get_objects",
    "gc.get_referrers",
    "gc.get_referents",
    "sys.settrace",
    "sys.setprofile",
    "builtins.input",
    "mmap.__new__",
    "webbrowser.open",
)
_DENIED_PREFIXES = ("ctypes.", "winreg.", "_winapi.")
_DENIED_IMPORTS = ("ctypes", "_ctypes", "_posixsubprocess", "cffi", "_cffi_backend", "mmap", "multiprocessing")
_PATH_EVENTS = {
    "os.chdir": 0,  # the REPL runs each cell in its own directory below the working directory
    "os.listdir": 0,
    "os.scandir": 0,
    "os.mkdir": 0,
    "os.remove": 0,
    "os.rmdir": 0,
    "os.rename": 0,
    "os.symlink": 0,
    "os.link": 0,
    "os.chmod": 0,
    "os.chown": 0,
    "os.truncate": 0,
    "os.utime": 0,
    "os.listxattr": 0,
    "os.getxattr": 0,
    "os.setxattr": 0,
    "os.removexattr": 0,
    "shutil.rmtree": 0,
    "shutil.copyfile": 0,
    "shutil.move": 0,
    "glob.glob": 0,
}


class SandboxViolation(PermissionError):
    pass


def install_audit_hook(workdir: str, read_roots: list[str], armed: threading.Event) -> None:
    work = os.path.realpath(workdir)
    roots = [os.path.realpath(r) for r in read_roots]

    def inside(path, trees) -> bool:
        if isinstance(path, int):
            return True  # an fd this process already holds
        if isinstance(path, os.PathLike):
            path = os.fspath(path)
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if not isinstance(path, str):
            return False
        full = os.path.realpath(path)  # a relative path from the current directory, as the call will take it
        return any(full == tree or full.startswith(tree + os.sep) for tree in trees)

    def hook(event: str, args: tuple) -> None:
        if not armed.is_set():
            return
        if event in _DENIED_EVENTS or event.startswith(_DENIED_PREFIXES):
            raise SandboxViolation(f"sandbox: {event} is not allowed")
        if event == "import" and args and str(args[0]).split(".")[0] in _DENIED_IMPORTS:
            raise SandboxViolation(f"sandbox: importing {args[0]} is not allowed")
        if event == "open":
            path, mode = args[0], args[1] if len(args) > 1 else "r"
            flags = args[2] if len(args) > 2 and isinstance(args[2], int) else 0
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (flags & (os.O_WRONLY | os.O_RDWR))
            if path is None or inside(path, [work]):
                return
            if not writing and inside(path, roots):
                return
            raise SandboxViolation(f"sandbox: no access to {path!r} outside the working directory")
        if event in _PATH_EVENTS:
            path = args[0] if args else None
            if path is not None and not inside(path, [work]):
                raise SandboxViolation(f"sandbox: {event} outside the working directory is not allowed")
        if event in ("socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg"):
            address = args[1] if len(args) > 1 else None
            host = address[0] if isinstance(address, tuple) and address else address
            if host not in ("127.0.0.1", "::1", "localhost"):
                raise SandboxViolation(f"sandbox: no network but the loopback ({event} {address!r})")

    sys.addaudithook(hook)


# --- the run -------------------------------------------------------------------------------------------------


def _relay_client_class():
    from rlm.clients.base_lm import BaseLM
    from rlm.core.types import ModelUsageSummary, UsageSummary

    class RelayClient(BaseLM):
        """An RLM backend client that asks the parent for every completion (the key and the network stay there)."""

        def __init__(self, model_name: str, **kwargs):
            super().__init__(model_name=model_name)
            self._lock = threading.Lock()
            self.calls = self.input_tokens = self.output_tokens = 0
            self._last = (0, 0)

        def completion(self, prompt, model=None) -> str:
            messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
            answer = request({"type": "llm", "messages": messages})
            if not answer.get("ok"):
                raise RuntimeError(answer.get("error") or "the backend call failed")
            usage = answer.get("usage") or {}
            with self._lock:
                self.calls += 1
                self.input_tokens += int(usage.get("input_tokens") or 0)
                self.output_tokens += int(usage.get("output_tokens") or 0)
                self._last = (int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0))
            content = answer.get("content") or ""
            if getattr(_state, "value", False) and not getattr(_state, "in_cell", False):
                send({"type": "model", "response": content})  # the root's own reply, before its cells run
            return content

        async def acompletion(self, prompt, model=None) -> str:
            import asyncio

            return await asyncio.to_thread(self.completion, prompt, model)

        def get_usage_summary(self):
            summary = ModelUsageSummary(self.calls, self.input_tokens, self.output_tokens, None)
            return UsageSummary(model_usage_summaries={self.model_name: summary})

        def get_last_usage(self):
            return ModelUsageSummary(1, self._last[0], self._last[1], None)

    return RelayClient


def _tool_function(name: str):
    def call(**arguments):
        answer = request({"type": "tool", "name": name, "arguments": arguments})
        content = answer.get("content") or ""
        if answer.get("is_error"):
            return f"Error: {content}"
        return content

    call.__name__ = name
    return call


def _brief(text, limit: int = 20000) -> str:
    text = "" if text is None else str(text)
    return text if len(text) <= limit else text[:limit] + f"\n[… {len(text) - limit} more characters]"


def _sub_calls(result) -> list[dict]:
    calls = []
    for call in getattr(result, "rlm_calls", None) or []:
        usage = call.usage_summary.to_dict() if call.usage_summary else {}
        calls.append(
            {
                "model": call.root_model,
                "prompt": _brief(call.prompt if isinstance(call.prompt, str) else json.dumps(call.prompt), 2000),
                "response": _brief(call.response, 4000),
                "recursive": bool(call.metadata),
                "usage": usage,
            }
        )
    return calls


def main() -> None:
    global _channel
    _channel = os.fdopen(int(sys.argv[1]) if len(sys.argv) > 1 else CHANNEL_FD, "w", buffering=1, encoding="utf-8")
    job = json.loads(sys.stdin.readline())
    workdir = job["workdir"]
    os.chdir(workdir)

    # `rlm` loads `.env` files from its own directory upwards at import: not in here.
    import dotenv

    dotenv.load_dotenv = lambda *args, **kwargs: False
    import rlm.clients
    import rlm.core.rlm as rlm_core
    from rlm import RLM
    from rlm.environments import local_repl
    from rlm.logger import RLMLogger
    from rlm.utils.prompts import RLM_SYSTEM_PROMPT

    relay = _relay_client_class()
    # Every client the RLM builds (root, sub-calls, fallbacks) asks the parent.
    rlm_core.get_client = lambda backend, kwargs: relay(model_name=(kwargs or {}).get("model_name") or job["model"])
    rlm.clients.get_client = rlm_core.get_client

    threading.Thread(target=_read_answers, name="rlm-answers", daemon=True).start()

    class ChannelLogger(RLMLogger):
        def log(self, iteration) -> None:
            super().log(iteration)
            send(
                {
                    "type": "iteration",
                    "index": self.iteration_count,
                    "response": iteration.response,
                    "final_answer": iteration.final_answer,
                    "code_blocks": [
                        {
                            "code": block.code,
                            "stdout": _brief(block.result.stdout),
                            "stderr": _brief(block.result.stderr),
                            "sub_calls": _sub_calls(block.result),
                        }
                        for block in iteration.code_blocks
                    ],
                }
            )

    original_execute = local_repl.LocalREPL.execute_code
    original_turn = rlm_core.RLM._completion_turn
    counter = {"n": 0}
    in_root_turn = _state

    def completion_turn(self, *args, **kwargs):
        before = getattr(in_root_turn, "value", False)
        in_root_turn.value = self.depth == 0
        try:
            return original_turn(self, *args, **kwargs)
        finally:
            in_root_turn.value = before

    def execute_code(self, code: str):
        # The root REPL's cells (depth 1) that the model wrote are the run's steps; the cells `rlm` runs itself
        # (loading the context) are not, and sub-RLMs' cells are reported inside their call.
        report = getattr(in_root_turn, "value", False) and self.depth == 1
        if report:
            counter["n"] += 1
            send({"type": "code_start", "n": counter["n"], "code": code})
        _state.in_cell = report or getattr(_state, "in_cell", False)
        try:
            result = original_execute(self, code)
        finally:
            if report:
                _state.in_cell = False
        if report:
            send(
                {
                    "type": "code_end",
                    "n": counter["n"],
                    "stdout": _brief(result.stdout),
                    "stderr": _brief(result.stderr),
                }
            )
        return result

    local_repl.LocalREPL.execute_code = execute_code
    rlm_core.RLM._completion_turn = completion_turn

    limits = job.get("limits") or {}
    sandbox = {"network_namespace": only_loopback(), "pid_namespace": os.getpid() == 1}
    if sandbox["network_namespace"]:
        sandbox["loopback"] = loopback_up()
    read_roots = sorted({sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable))})
    read_roots += [p for p in ("/usr/lib", "/usr/lib64", "/lib", "/lib64", "/etc/ld.so.cache") if os.path.exists(p)]
    read_roots += [p for p in ("/dev/null", "/dev/urandom") if os.path.exists(p)]
    try:
        sandbox["landlock_abi"] = landlock(read_roots, [workdir])
    except OSError as exc:
        sandbox["landlock_abi"] = 0
        sandbox["landlock_error"] = str(exc)
    sandbox["rlimits"] = apply_rlimits(limits)

    def out_of_cpu(signum, frame):  # the soft CPU limit: say so before the hard one kills without a word
        send({"type": "limit", "reason": "cpu_limit"})
        os._exit(152)

    import signal

    signal.signal(signal.SIGXCPU, out_of_cpu)
    armed = threading.Event()
    install_audit_hook(workdir, read_roots, armed)
    sandbox["audit_hook"] = True
    # The key-free environment is the parent's doing; say what the program will see.
    sandbox["environment"] = sorted(os.environ)
    send({"type": "ready", "sandbox": sandbox})

    tools = {
        name: {"tool": _tool_function(name), "description": description}
        for name, description in (job.get("tools") or {}).items()
    }
    system = job.get("system") or ""
    prompt = RLM_SYSTEM_PROMPT
    if system:
        prompt += "\n\nYour instructions as this agent:\n" + system.replace("{", "{{").replace("}", "}}")
    engine = RLM(
        backend="openai",
        backend_kwargs={"model_name": job["model"]},
        environment="local",
        max_iterations=int(job["max_iterations"]),
        max_depth=int(job["max_depth"]),
        max_timeout=float(job["timeout"]),
        custom_system_prompt=prompt,
        custom_tools=tools or None,
        custom_sub_tools={},  # sub-RLMs get no project tools: one memory writer per run, the root
        logger=ChannelLogger(),
        verbose=False,
    )
    armed.set()  # from here on this process runs the model's code
    try:
        result = engine.completion(job["context"], root_prompt=job["root_prompt"])
        send({"type": "done", "response": result.response, "error": getattr(result, "error", None)})
    except BaseException as exc:  # reported, then the process ends
        send({"type": "failed", "error": f"{type(exc).__name__}: {exc}"})
    _channel.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
