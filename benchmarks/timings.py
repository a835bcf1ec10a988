"""The measured times the documentation states: each command timed here, the result written out.

Workload: the commands a reader runs and asks "how long?" about (:data:`MEASUREMENTS`): the
main job ``ustat-rl verify --quick``, its full sizes, the errata, and the test suite's fast tier
and both tiers. Each runs once, as a child of a fresh process that reports its peak memory, on
the checkout this script lies in; the wall time, the counts the command prints (the verdicts of
a verify run, pytest's passed and skipped), the machine (CPU model, cores, memory, GPU) and the
load average sampled every two seconds during the run (its lowest and highest) are recorded.

The records go to ``docs/measured/timings.json`` (one entry per measurement; running some keeps
the others) and the table the docs include, ``docs/measured/timings.md``, is written from that
file alone (:func:`render`; ``tests/docs/test_figures.py`` checks that they agree and that the
pages type no time of their own). A command that exits non-zero records nothing: a time of a
failed run would be read as the time of the job.

Usage::

    python benchmarks/timings.py --only verify-quick
    python benchmarks/timings.py --only fast-tier,both-tiers
    python benchmarks/timings.py --render-only      # the table again from the JSON
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Where the records and the included table live.
OUT = ROOT / "docs" / "measured"
#: Seconds between two samples of the load average during a run.
LOAD_EVERY = 2.0


@dataclass(frozen=True)
class Measurement:
    """One command whose time the docs state: what it is, how it is run, how to read it."""

    what: str
    command: tuple[str, ...]
    counts: str  # "verify" or "pytest": how the printed counts are read
    env: tuple[tuple[str, str], ...] = ()


_TESTS = ("python", "-m", "pytest", "-n", "2", "-q", "-p", "no:cacheprovider")
#: Every measurement, by name, in the order of the table.
MEASUREMENTS = {
    "verify-quick": Measurement("the main job", ("ustat-rl", "verify", "--quick"), "verify"),
    "verify-full": Measurement("every claim at full sizes", ("ustat-rl", "verify", "--full"),
                               "verify"),
    "errata": Measurement("the paper's slips with their evidence",
                          ("ustat-rl", "verify", "--errata"), "none"),
    "fast-tier": Measurement("the fast tier", _TESTS, "pytest", (("OMP_NUM_THREADS", "1"),)),
    "both-tiers": Measurement("both tiers",
                              _TESTS + ("-m", "integration or not integration"), "pytest",
                              (("OMP_NUM_THREADS", "1"),)),
}


def shown_command(measurement: Measurement) -> str:
    """The command as a reader types it (environment settings first)."""
    settings = [f"{k}={v}" for k, v in measurement.env]
    return shlex.join([*settings, *measurement.command]).replace("'", '"')


def verify_counts(json_path: Path) -> dict:
    """Claims, verdict counts and seconds of checks from a verify run's JSON."""
    payload = json.loads(json_path.read_text())
    counts = {k: int(v) for k, v in payload["summary"].items()}
    return {"claims": len(payload["results"]), **counts,
            "seconds_of_checks": round(float(payload["seconds"]), 1)}


_PYTEST_PART = re.compile(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed|deselected)")


def pytest_counts(output: str) -> dict:
    """Passed, skipped, ... from the last summary line pytest prints."""
    lines = [line for line in output.splitlines() if _PYTEST_PART.search(line)
             and (" in " in line or line.startswith("="))]
    if not lines:
        raise ValueError("pytest printed no summary line (N passed ... in S)")
    return {word.rstrip("s") if word.startswith("error") else word: int(n)
            for n, word in _PYTEST_PART.findall(lines[-1])}


def machine() -> dict:
    """The machine a measurement ran on."""
    model = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        names = re.findall(r"^model name\s*:\s*(.+)$", cpuinfo.read_text(), re.M)
        model = names[0].strip() if names else model
    memory = None
    meminfo = Path("/proc/meminfo")
    if meminfo.is_file():
        found = re.search(r"^MemTotal:\s*(\d+) kB", meminfo.read_text(), re.M)
        memory = round(int(found.group(1)) / 2**20, 1) if found else None
    gpu = "none (no nvidia-smi)"
    if shutil.which("nvidia-smi"):
        listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
        gpu = listed.stdout.strip().replace("\n", "; ") or "none listed by nvidia-smi"
    return {"cpu": model, "cores": os.cpu_count(), "memory_gib": memory, "gpu": gpu,
            "platform": platform.platform(), "python": platform.python_version()}


def _commit() -> str | None:
    done = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True)
    return done.stdout.strip() or None


_PEAK = ("import resource, subprocess, sys\n"
         "rc = subprocess.call(sys.argv[1:])\n"
         "print(f'@@peak_kib {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}')\n"
         "sys.exit(rc)\n")


def measure(name: str) -> dict:
    """Run one measurement on this checkout and return its record.

    Raises
    ------
    RuntimeError
        If the command exits non-zero (nothing is recorded).
    """
    measurement = MEASUREMENTS[name]
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    # the package of this checkout, whichever checkout the environment was installed from
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    env.update(measurement.env)
    loads: list[float] = []
    stop = threading.Event()

    def sample():
        while True:
            loads.append(os.getloadavg()[0])
            if stop.wait(LOAD_EVERY):
                return

    with tempfile.TemporaryDirectory(prefix="timings-") as tmp:
        command = list(measurement.command)
        if measurement.counts == "verify":
            command += ["--json", str(Path(tmp) / "verify.json")]
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", _PEAK, *command], cwd=ROOT, env=env,
                              capture_output=True, text=True)
        wall = time.perf_counter() - start
        stop.set()
        sampler.join()
        if done.returncode != 0:
            raise RuntimeError(f"{name}: `{shown_command(measurement)}` exited "
                               f"{done.returncode}; nothing recorded\n{done.stdout[-2000:]}"
                               f"{done.stderr[-2000:]}")
        peak = re.search(r"@@peak_kib (\d+)", done.stdout)
        counts = (verify_counts(Path(tmp) / "verify.json") if measurement.counts == "verify"
                  else pytest_counts(done.stdout) if measurement.counts == "pytest" else {})
    return {"what": measurement.what, "command": shown_command(measurement),
            "counts": counts, "wall_seconds": round(wall, 1),
            "peak_memory_gib": round(int(peak.group(1)) / 2**20, 2) if peak else None,
            "load_average": [round(min(loads), 1), round(max(loads), 1)],
            "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "commit": _commit(), "machine": machine()}


def duration(seconds: float) -> str:
    """``94.6 s`` under two minutes, ``12 min 6 s`` above."""
    if seconds < 120:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s"


def result_text(counts: dict) -> str:
    """The counts as the docs show them."""
    if "claims" in counts:
        verdicts = ", ".join(f"{counts[v]} {v}" for v in ("pass", "refuted", "differs", "fail",
                                                          "error", "skipped") if v in counts)
        return f"{counts['claims']} claims: {verdicts}"
    return ", ".join(f"{n} {word}" for word, n in counts.items())


def render(records: dict) -> str:
    """The Markdown table the docs include, from the records alone."""
    lines = ["<!-- Written by `python benchmarks/timings.py` from docs/measured/timings.json; "
             "do not edit by hand. -->", "",
             "| what | command | result | time | machine, load average during the run, date |",
             "|---|---|---|---|---|"]
    for name in MEASUREMENTS:
        if name not in records:
            continue
        r = records[name]
        counts = r["counts"]
        time_text = duration(r["wall_seconds"]) + " wall"
        if "seconds_of_checks" in counts:
            time_text = f"{counts['seconds_of_checks']:.1f} s of checks, {time_text}"
        if r.get("peak_memory_gib") is not None:
            time_text += f", peak memory {r['peak_memory_gib']:.1f} GiB"
        m = r["machine"]
        low, high = r["load_average"]
        where = (f"{m['cores']} cores ({m['cpu']}), {m['memory_gib']} GiB, GPU: {m['gpu']}; "
                 f"load {low}-{high}; {r['finished'][:10]}, commit {r['commit']}")
        lines.append(f"| {r['what']} | `{r['command']}` | {result_text(counts) or '-'} | "
                     f"{time_text} | {where} |")
    missing = [name for name in MEASUREMENTS if name not in records]
    if missing:
        lines += ["", "Not measured yet: " + ", ".join(
            f"{MEASUREMENTS[n].what} (`python benchmarks/timings.py --only {n}`)"
            for n in missing) + "."]
    return "\n".join(lines) + "\n"


def read_records(out: Path) -> dict:
    path = out / "timings.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def write(out: Path, records: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    ordered = {name: records[name] for name in MEASUREMENTS if name in records}
    (out / "timings.json").write_text(json.dumps(ordered, indent=2) + "\n")
    (out / "timings.md").write_text(render(ordered))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=None,
                        help=f"comma-separated measurements, of {', '.join(MEASUREMENTS)}")
    parser.add_argument("--out", type=Path, default=OUT,
                        help="folder of timings.json and timings.md (default docs/measured)")
    parser.add_argument("--render-only", action="store_true",
                        help="rewrite timings.md from timings.json, measuring nothing")
    args = parser.parse_args(argv)
    names = list(MEASUREMENTS) if args.only is None else [
        n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in names if n not in MEASUREMENTS]
    if unknown or not names:
        parser.error(f"--only must name measurements of {', '.join(MEASUREMENTS)}, "
                     f"got {args.only!r}")
    if args.out.exists() and not args.out.is_dir():
        parser.error(f"--out {args.out} is a file, not a folder")
    records = read_records(args.out)
    if not args.render_only:
        for name in names:
            print(f"measuring {name}: {shown_command(MEASUREMENTS[name])}", flush=True)
            try:
                records[name] = measure(name)
            except RuntimeError as failed:
                print(failed, file=sys.stderr)
                return 1
            write(args.out, records)  # each finished measurement is kept at once
    write(args.out, records)
    print(render(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
