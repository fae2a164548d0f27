"""What the benchmarks that measure each case in a child process and keep labelled runs share
(``profile_fits.py``, ``predict_memory.py``): peak memory from ``/proc``, the child's result
line, the record of a run and its section of the results page."""

import json
import os
import platform
import subprocess
import time
from pathlib import Path

#: The line a child process prints its result on, as JSON after this prefix.
RESULT = "RESULT "


def status_mb(field: str) -> float:
    """A memory field of ``/proc/self/status`` (``VmRSS``, ``VmHWM``) in MB."""
    status = Path("/proc/self/status").read_text()
    return int(status.split(f"{field}:")[1].split()[0]) / 1024


def reset_peak() -> bool:
    """Reset ``VmHWM`` to the current resident memory (Linux ≥ 4.0); False where refused."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def print_result(out: dict) -> None:
    """The child's result, for :func:`run_child`."""
    print(RESULT + json.dumps(out), flush=True)


def run_child(name: str, command: list) -> dict:
    """Run ``command`` (a child measuring case ``name``); the result it printed."""
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"{name}: {done.stderr[-3000:]}")
    line = next(x for x in done.stdout.splitlines() if x.startswith(RESULT))
    return json.loads(line[len(RESULT) :])


def command_line(script: str, only, *flags: str) -> str:
    """The command that reruns a run (``only``: its ``--only`` prefixes)."""
    command = " ".join([f"python benchmarks/{script}", *flags])
    if only:
        command += " --only " + " ".join(f"'{o}'" for o in only)
    return command


def run_record(command: str, started: float, load_start: float, rows: list, **extra) -> dict:
    """A run as stored in the results' JSON: its command (and ``extra``), the machine, the
    1-minute load averages at its start and end, its minutes and rows."""
    return dict(
        command=command,
        **extra,
        machine=f"{platform.machine()}, Python {platform.python_version()}",
        load_start=load_start,
        load_end=os.getloadavg()[0],
        minutes=(time.perf_counter() - started) / 60,
        rows=rows,
    )


def run_sections(runs: dict, table, how=lambda run: "; ") -> list:
    """Markdown lines of each labelled run: its heading, command (then ``how(run)``), loads,
    minutes, machine and ``table(rows)``."""
    parts = []
    for label, run in runs.items():
        parts += [
            "",
            f"### {label}",
            "",
            f"`{run['command']}`{how(run)}load average {run['load_start']:.1f} at the start, "
            f"{run['load_end']:.1f} at the end ({run['minutes']:.1f} min; {run['machine']}).",
            "",
            table(run["rows"]),
        ]
    return parts
