"""The RLM child process: runs one `rlm.RLM(...).completion()` inside a sandbox and reports it as JSON lines.

Started by providers/runtimes/rlm/launch.py as `python -I -B <this directory>` (isolated mode: no PYTHON*
variables, no user site; see `__init__.py` for how it finds its siblings), so it imports nothing of OpenCompany:
only the standard library, `rlm`, `channel.py` and `confinement.py`. The RLM's "local" REPL `exec`s the model's
code in this process, so everything after the audit hook is armed treats this process as hostile. Before the first
model call it:

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
tools (memory, todos) are REPL functions that do the same.
"""

from __future__ import annotations

import json
import os
import sys
import threading

from channel import CHANNEL_FD, flush, open_channel, read_answers, request, send
from confinement import apply_rlimits, install_audit_hook, landlock, loopback_up, only_loopback

_HERE = os.path.dirname(os.path.realpath(__file__))
_state = threading.local()  # value: this thread runs the root RLM's turn; in_cell: it runs one of its cells


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
    # The model's code sees the sys.path a single-file child would have: not this directory.
    if sys.path and os.path.realpath(sys.path[0]) == _HERE:
        del sys.path[0]
    open_channel(int(sys.argv[1]) if len(sys.argv) > 1 else CHANNEL_FD)
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

    threading.Thread(target=read_answers, name="rlm-answers", daemon=True).start()

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
    flush()
    os._exit(0)


if __name__ == "__main__":
    main()
