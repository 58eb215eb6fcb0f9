"""What confines the RLM child before it runs the model's code: resource limits, the loopback of its own network
namespace, Landlock (read-only Python, read-write only its working directory, no execute anywhere) and an audit
hook that refuses, once armed, file access outside the working directory, processes, signals, ctypes, raw sockets
to anything but loopback and changes to its own limits. Only the standard library: a test loads this file alone.
"""

from __future__ import annotations

import os
import sys
import threading

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
