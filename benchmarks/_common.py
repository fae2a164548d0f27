"""The benchmarks' one harness: their command line, timer, memory readings, child processes,
run record and the writers of ``docs/results/``. Each script keeps only its protocol (data,
models, table) and takes the rest from here.

- :func:`parser`: the command line, ``--quick`` (a small, fast version of the protocol) and the
  flags several scripts share (``--only``, ``--label`` / ``--no-write``, ``--n-jobs``,
  ``--data``, the hidden ``--one`` of a child process);
- :func:`timed`: best-of-``repeat`` wall seconds of a call (timeit's rule);
- :func:`status_mb`, :func:`peak_mb`, :func:`resident_mb`, :func:`reset_peak`: memory of this
  process from ``/proc/self/status``;
- :func:`child`, :func:`print_result`, :func:`run_child`: a case measured in its own process;
- :class:`Run`: one run — its command, load averages at its start and end, minutes, the
  record stored in the results' JSON and where it writes: ``docs/results/`` for a full run, a
  temporary folder for ``--quick`` (the committed results are never overwritten by a quick run);
- :func:`rerun_line`: the one line of a results page about the run, how to rerun it;
- :func:`stored_runs`, :func:`latest_run`, :func:`render`: the results of the scripts that keep
  labelled runs (the "before" table of a change).

A results page is documentation (the user guide includes it): the protocol, the tables and
figures, and one line on how to rerun it (:func:`rerun_line`). The run's notes — command,
machine, cores, load averages, minutes, date, the library's commit — go to the JSON beside it
only (:meth:`Run.notes`, stored under ``"run"``; the labelled runs keep theirs in each run).
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: The repository's root.
ROOT = Path(__file__).resolve().parents[1]
#: The committed results: what full runs write, and what some scripts read (``ocr_table.json``).
RESULTS = ROOT / "docs" / "results"


# ---- the command line --------------------------------------------------------------------
def parser(
    doc: str,
    quick: str,
    *,
    only: str | None = None,
    label: bool = False,
    n_jobs: str | None = None,
    data: str | None = None,
    child: str | int | None = None,
) -> argparse.ArgumentParser:
    """The command line of a benchmark described by its docstring ``doc`` (the first paragraph
    is the description): ``--quick`` (``quick``: what it runs), and where asked ``--only NAME
    ...`` (``only``: what the names are), ``--label LABEL``, ``--no-write`` and ``--render``
    (``label``: the scripts that keep labelled runs), ``--n-jobs N`` (default 2; ``n_jobs``:
    its help), ``--data PATH`` (``data``: its help) and the hidden ``--one`` that starts a
    child process (``child``: its ``nargs``)."""
    out = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    out.add_argument("--quick", action="store_true", help=quick)
    if only is not None:
        out.add_argument("--only", nargs="*", default=None, help=f"{only} (by name prefix)")
    if label:
        out.add_argument("--label", default="now", help="name of this run in the results")
        out.add_argument("--no-write", action="store_true", help="print only")
        out.add_argument(
            "--render",
            action="store_true",
            help="measure nothing: rewrite the page from its JSON (the latest labelled run)",
        )
    if n_jobs is not None:
        out.add_argument("--n-jobs", type=int, default=2, help=n_jobs)
    if data is not None:
        out.add_argument("--data", default=None, help=data)
    if child is not None:
        out.add_argument("--one", nargs=child, default=None, help=argparse.SUPPRESS)
    return out


def selected(names, only) -> list:
    """The ``names`` that start with one of the ``--only`` prefixes (all without ``--only``)."""
    return [n for n in names if not only or any(n.startswith(o) for o in only)]


# ---- time and memory ---------------------------------------------------------------------
def timed(function, *args, repeat: int = 1, **kwargs):
    """``(function(*args, **kwargs), seconds)``: the fewest wall seconds of ``repeat`` calls
    (timeit's rule: the slower calls measure what else the machine was doing), and the result
    of the last call."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        result = function(*args, **kwargs)
        best = min(best, time.perf_counter() - start)
    return result, best


def status_mb(field: str) -> float:
    """A memory field of ``/proc/self/status`` (``VmRSS``, ``VmHWM``) in MB."""
    status = Path("/proc/self/status").read_text()
    return int(status.split(f"{field}:")[1].split()[0]) / 1024


def peak_mb() -> float:
    """The peak resident memory of this process (``VmHWM``), in MB."""
    return status_mb("VmHWM")


def resident_mb() -> float:
    """The resident memory of this process now (``VmRSS``), in MB."""
    return status_mb("VmRSS")


def reset_peak() -> bool:
    """Reset ``VmHWM`` to the current resident memory (Linux ≥ 4.0); False where refused."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def loads() -> tuple:
    """The 1-, 5- and 15-minute load averages of the machine now."""
    return os.getloadavg()


def code_version() -> tuple:
    """``(commit, changed)``: the short commit of the repository's ``HEAD`` (``"unknown"``
    outside git) and the files of ``pmap_sklearn/`` with uncommitted changes."""

    def git(*args):
        try:
            done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
        except OSError:
            return ""
        return done.stdout.strip() if done.returncode == 0 else ""

    changed = [line[3:] for line in git("status", "--porcelain", "--", "pmap_sklearn").splitlines()]
    return git("rev-parse", "--short", "HEAD") or "unknown", changed


# ---- child processes ---------------------------------------------------------------------
#: The line a child process prints its result on, as JSON after this prefix.
RESULT = "RESULT "


def child(script, *args) -> list:
    """The command that runs ``script`` (its ``__file__``) as a child measuring one case:
    ``--one`` and ``args``."""
    return [sys.executable, str(script), "--one", *map(str, args)]


def print_result(out) -> None:
    """The child's result, for :func:`run_child`."""
    print(RESULT + json.dumps(out), flush=True)


def run_child(name: str, command: list, timeout: float | None = None):
    """Run ``command`` (a child measuring case ``name``); the result it printed, or None when
    it ran over ``timeout`` seconds."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    if done.returncode:
        raise RuntimeError(f"{name}: {done.stderr[-3000:]}")
    line = next(x for x in done.stdout.splitlines() if x.startswith(RESULT))
    return json.loads(line[len(RESULT) :])


# ---- the run and its results -------------------------------------------------------------
class Run:
    """One run of a benchmark script (``script``: its ``__file__``), started now: its clock,
    load averages (``load``) and the library's commit (``version``: :func:`code_version`, the
    code it imports), its command, record and results folder.

    A full run writes ``docs/results/``; a ``quick`` one writes a temporary folder, made on its
    first write and printed, so that the committed results stay those of the full protocol.
    """

    def __init__(self, script, quick: bool = False):
        self.name = Path(script).name
        self.quick = quick
        self.started = time.perf_counter()
        self.load = loads()
        self.version = code_version()
        self.date = time.strftime("%Y-%m-%d")
        self._folder = None

    def minutes(self) -> float:
        """Minutes since the start of the run."""
        return (time.perf_counter() - self.started) / 60

    def command(self, *flags: str, only=None) -> str:
        """The command that reruns this run: the script, ``--quick`` where it is one, ``flags``
        and the ``--only`` prefixes ``only``."""
        command = " ".join([f"python benchmarks/{self.name}", *["--quick"] * self.quick, *flags])
        if only:
            command += " --only " + " ".join(f"'{o}'" for o in only)
        return command

    def notes(self, *flags: str, only=None, command=None, minutes=None, **extra) -> dict:
        """The run's notes, for the results' JSON only (a page shows :func:`rerun` of them):
        its command (``command``, else :meth:`command` of ``flags`` and ``only``), the machine
        and its cores, the 1-minute load averages at the start and now, the minutes
        (``minutes``, else since the start), the date, the library's commit with its files
        changed since, and ``extra`` (which may replace any of them: ``load_start`` of a
        part of the run)."""
        commit, changed = self.version
        out = dict(
            command=command or self.command(*flags, only=only),
            machine=f"{platform.machine()}, Python {platform.python_version()}",
            cores=os.cpu_count(),
            load_start=self.load[0],
            load_end=loads()[0],
            minutes=self.minutes() if minutes is None else minutes,
            date=self.date,
            commit=commit,
            uncommitted=changed,
        )
        out.update(extra)
        return out

    def record(self, rows, *flags: str, only=None, **extra) -> dict:
        """A labelled run as stored in the results' JSON: its :meth:`notes` (command,
        machine, loads, minutes, commit and ``extra``) and ``rows``."""
        return dict(**self.notes(*flags, only=only, **extra), rows=rows)

    @property
    def results(self) -> Path:
        """Where this run writes: ``docs/results/``, or a fresh temporary folder on quick runs."""
        if not self.quick:
            RESULTS.mkdir(parents=True, exist_ok=True)
            return RESULTS
        if self._folder is None:
            stem = Path(self.name).stem
            self._folder = Path(tempfile.mkdtemp(prefix=f"pmap-benchmarks-{stem}-quick-"))
            print(f"--quick: results go to {self._folder} (docs/results/ is left as it is)")
        return self._folder

    def path(self, name: str) -> Path:
        """The path of the results file ``name`` (a figure, say)."""
        return self.results / name

    def write(self, name: str, text: str) -> Path:
        """Write ``text`` as it is to the results file ``name`` (markdown)."""
        path = self.path(name)
        path.write_text(text)
        return path

    def write_json(self, name: str, payload, indent: int = 1, default=None) -> Path:
        """Write ``payload`` as JSON (``indent``, ``default`` as ``json.dumps``'s) to ``name``."""
        return self.write(name, json.dumps(payload, indent=indent, default=default))

    def save(self, stem: str, markdown: str, payload, indent: int = 1, default=None) -> None:
        """The page ``stem.md`` (``markdown`` as it is) and its data ``stem.json``."""
        self.write(f"{stem}.md", markdown)
        self.write_json(f"{stem}.json", payload, indent, default)

    def publish(self, stem: str, lines: list, payload, indent: int = 1) -> None:
        """Print the page's ``lines`` and :meth:`save` them (one line each, a newline at the
        end) with ``payload``."""
        text = "\n".join(lines)
        self.save(stem, text + "\n", payload, indent)
        print(text)

    def loads_record(self, minutes: float, after) -> dict:
        """The opening of a JSON record: the load averages before and ``after``, the minutes."""
        return dict(load_before=self.load, load_after=after, minutes=minutes)

    def store(self, stem: str, label: str, record: dict, markdown, replace=None, **top) -> None:
        """Store ``record`` as the labelled run ``label`` of ``stem.json`` beside the runs
        stored under other labels (``replace(stored, record)``: the run to store when ``label``
        is stored already), with the ``top`` entries and ``latest``: ``label``; and rewrite
        the page ``stem.md`` as ``markdown(label, record)`` — the run just stored only (the
        others stay in the JSON)."""
        runs = stored_runs(self.path(f"{stem}.json"))
        if replace is not None and label in runs:
            record = replace(runs[label], record)
        runs[label] = record
        self.write_json(f"{stem}.json", dict(**top, latest=label, runs=runs), indent=2)
        self.write(f"{stem}.md", markdown(label, record))


def pyplot():
    """matplotlib's pyplot, drawing to files only (the Agg backend)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(figure, path, dpi: int) -> None:
    """Lay ``figure`` out tightly and write it to ``path`` at ``dpi``."""
    figure.tight_layout()
    figure.savefig(path, dpi=dpi)


def stored_runs(path: Path) -> dict:
    """The labelled runs stored in the results' JSON ``path`` (none when it does not exist)."""
    return json.loads(path.read_text())["runs"] if path.exists() else {}


def latest_run(path: Path) -> tuple:
    """``(label, record)``: the run of the results' JSON ``path`` stored last (its
    ``latest``; in files from before that key, the last label)."""
    stored = json.loads(path.read_text())
    label = stored.get("latest") or list(stored["runs"])[-1]
    return label, stored["runs"][label]


def render(stem: str, markdown) -> Path:
    """Rewrite the committed page ``stem.md`` of a script that keeps labelled runs as
    ``markdown(label, record)`` of the latest run of ``stem.json``, measuring nothing (after a
    change of the page's form)."""
    path = RESULTS / f"{stem}.md"
    path.write_text(markdown(*latest_run(RESULTS / f"{stem}.json")))
    print(f"{path}: rewritten from {stem}.json")
    return path


def about(minutes: float) -> str:
    """A run's length as a page gives it: ``under a minute``, whole minutes up to 10, then
    the nearest 5 minutes, and the nearest 10 from an hour (24.1 -> ``about 25 min``)."""
    if minutes < 0.95:
        return "under a minute"
    step = 1 if minutes < 9.5 else 5 if minutes < 57.5 else 10
    return f"about {step * int(minutes / step + 0.5)} min"


def rerun_line(command: str, minutes: float | None = None, cores: int | None = None) -> str:
    """The one line of a results page about its run: how to rerun it, ``command`` in
    backticks, and about how long it takes (``minutes`` of the run, on its ``cores``), e.g.
    ``Rerun: `python benchmarks/sampling.py` (under a minute on 2 cores).``"""
    if minutes is None:
        return f"Rerun: `{command}`."
    where = f" on {cores} cores" if cores else ""
    return f"Rerun: `{command}` ({about(minutes)}{where})."


def rerun(notes: dict) -> str:
    """:func:`rerun_line` of a run's :meth:`Run.notes` (or a labelled run's record)."""
    return rerun_line(notes["command"], notes.get("minutes"), notes.get("cores"))
