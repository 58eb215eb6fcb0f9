"""The worker process a benchmark starts: stopped politely, then killed if it does not go within 20 s."""

import subprocess


def stop_process(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
