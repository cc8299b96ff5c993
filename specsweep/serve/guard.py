"""The measurement-time guard: the host's load and every other specsweep server, before and during a run.

The host lock (``serve.lock``) keeps specsweep jobs that share its directory
apart. What it cannot see: a server whose job died and whose teardown was
killed too (a cgroup kill), a container of another checkout, a job whose lock
directory differs (a private ``/tmp``), a server started by hand. So the job
also looks, and a result measured beside another server is ``contaminated``,
never ``ok``. How servers are found:

* **processes**: every server a specsweep job starts carries
  ``SPECSWEEP_RUN_ID`` (and ``SPECSWEEP_CONFIG``, ``SPECSWEEP_CHECKOUT``) in
  its environment, inherited by its ranks and passed into its container
  (``-e``). ``/proc/<pid>/environ`` is readable for one's own processes (all of
  them as root); another user's are not visible this way.
* **containers**: running containers labelled with a run id
  (``io.specsweep.run``, set on every server container a job starts), with
  their configuration and checkout labels (``docker ps``).
* **load**: ``/proc/loadavg`` (1/5/15-minute averages and runnable tasks)
  and the CPU count: recorded, and a warning when runnable tasks exceed the
  CPUs, but load alone never marks a result (other work is not a server).

Sampling runs in its own process (``python -I guard.py``), never in a thread
of the job: the job's client timestamps every chunk, and a thread scanning
``/proc`` would hold the GIL in the middle of that. Stdlib only, so that it
runs by path.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Sequence

GUARD_PATH = Path(__file__).resolve()
RUN_ENV = "SPECSWEEP_RUN_ID"
CONFIG_ENV = "SPECSWEEP_CONFIG"
CHECKOUT_ENV = "SPECSWEEP_CHECKOUT"
PROJECT_LABEL_KEY = "io.specsweep.project"
RUN_LABEL_KEY = "io.specsweep.run"
CONFIG_LABEL_KEY = "io.specsweep.config"
CHECKOUT_LABEL_KEY = "io.specsweep.checkout"
WORKDIR_LABEL_KEY = "io.specsweep.workdir"
DEFAULT_INTERVAL_S = 2.0


def _environ(pid: str) -> dict[str, str] | None:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None  # gone, or another user's
    env = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep and key in (b"SPECSWEEP_RUN_ID", b"SPECSWEEP_CONFIG", b"SPECSWEEP_CHECKOUT"):
            env[key.decode()] = value.decode(errors="replace")
    return env


def run_id_of(pid: int | str) -> str | None:
    """The run id a process carries (``RUN_ENV``), or None (none, gone, or another user's)."""
    return (_environ(str(pid)) or {}).get(RUN_ENV)


def exiting(pid: int | str) -> bool:
    """Whether process ``pid`` is gone or on its way out: no /proc entry, a zombie, or no environment left to read
    (an exiting process has released its memory; a live one has at least PATH)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except (OSError, ValueError):
        return True
    return stat.rpartition(")")[2].split()[:1] in (["Z"], ["X"]) or not raw


def labelled_processes(own_run_id: str | None) -> list[dict[str, Any]]:
    """Other runs' server processes on this host, one entry per run id (pids sorted)."""
    runs: dict[str, dict[str, Any]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        env = _environ(entry)
        if not env or RUN_ENV not in env or env[RUN_ENV] == own_run_id:
            continue
        run = runs.setdefault(env[RUN_ENV], {"kind": "process", "run_id": env[RUN_ENV], "pids": [],
                                             "config": env.get(CONFIG_ENV), "checkout": env.get(CHECKOUT_ENV)})
        run["pids"].append(int(entry))
    for run in runs.values():
        run["pids"].sort()
    return sorted(runs.values(), key=lambda r: r["run_id"])


def labelled_containers(own_run_id: str | None, docker: str = "docker") -> tuple[list[dict[str, Any]], str]:
    """Running server containers of other runs, and the state of the docker check (``ok`` or why not).

    Only containers with a run label count: that label is what a server job
    puts on its container; other containers that carry the project label (a
    test's sleeper) are no server.
    """
    if shutil.which(docker) is None:
        return [], "no docker CLI"
    fmt = "\t".join(["{{.Names}}", *(f'{{{{.Label "{k}"}}}}' for k in (RUN_LABEL_KEY, CONFIG_LABEL_KEY,
                                                                        WORKDIR_LABEL_KEY))])
    try:
        proc = subprocess.run([docker, "ps", "--filter", f"label={PROJECT_LABEL_KEY}",  # noqa: S603
                               "--filter", f"label={RUN_LABEL_KEY}", "--format", fmt],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [], f"docker ps failed: {exc}"
    if proc.returncode != 0:
        return [], f"docker ps exited {proc.returncode}: {proc.stderr.strip()[-200:]}"
    out = []
    for line in proc.stdout.splitlines():
        name, run_id, config, checkout = (line.split("\t") + ["", "", ""])[:4]
        if name and run_id != own_run_id:
            out.append({"kind": "container", "name": name, "run_id": run_id or None, "config": config or None,
                        "checkout": checkout or None})
    return out, "ok"


def load() -> dict[str, Any]:
    """``/proc/loadavg``: averages, runnable tasks (without this reader) and the CPU count."""
    fields = Path("/proc/loadavg").read_text().split()
    running = int(fields[3].split("/")[0]) - 1
    return {"load1": float(fields[0]), "load5": float(fields[1]), "load15": float(fields[2]),
            "running": running, "cpus": os.cpu_count()}


def sample(own_run_id: str | None, docker: str = "docker", with_docker: bool = True) -> dict[str, Any]:
    """One observation of the host now."""
    containers, docker_state = labelled_containers(own_run_id, docker) if with_docker else ([], "not checked")
    return {"t": time.time(), **load(), "others": labelled_processes(own_run_id) + containers,
            "docker": docker_state}


def describe(others: Sequence[dict[str, Any]]) -> str:
    """One line naming other servers (what a message or a reason says)."""
    parts = []
    for o in others:
        checkout = o.get("checkout") or "an unknown checkout"
        where = f"configuration {o.get('config')!r} of {checkout}, run {o.get('run_id')}"
        if o["kind"] == "container":
            parts.append(f"container {o['name']} ({where})")
        else:
            pids = o.get("pids") or []
            parts.append(f"processes {pids[:5]}{'...' if len(pids) > 5 else ''} ({where})")
    return "; ".join(parts)


def distinct_others(samples: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every other server seen in any sample, once (by kind and run id or name), with first/last seen."""
    seen: dict[tuple, dict[str, Any]] = {}
    for s in samples:
        for o in s.get("others") or []:
            key = (o["kind"], o.get("run_id"), o.get("name"))
            entry = seen.setdefault(key, {**{k: v for k, v in o.items() if k != "pids"}, "first_seen": s["t"]})
            entry["last_seen"] = s["t"]
            if o.get("pids"):
                entry["pids"] = sorted(set(entry.get("pids", [])) | set(o["pids"]))
    return list(seen.values())


def summarize(samples: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """What outcome.json keeps of the samples taken while the server ran."""
    if not samples:
        return {"samples": 0, "others_seen": []}
    return {
        "samples": len(samples),
        "from": samples[0]["t"],
        "to": samples[-1]["t"],
        "interval_s": round((samples[-1]["t"] - samples[0]["t"]) / max(1, len(samples) - 1), 3),
        "load1_max": max(s["load1"] for s in samples),
        "running_max": max(s["running"] for s in samples),
        "cpus": samples[0]["cpus"],
        "docker": sorted({s["docker"] for s in samples}),
        "others_seen": distinct_others(samples),
    }


class Sampler:
    """The sampling process (job side): started beside the server, stopped after measurement."""

    def __init__(self, own_run_id: str, out: Path, interval_s: float = DEFAULT_INTERVAL_S, docker: str = "docker",
                 python: str = sys.executable) -> None:
        self.out = Path(out)
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.out.write_text("")
        argv = [python, "-I", str(GUARD_PATH), "--run-id", own_run_id, "--out", str(self.out),
                "--interval", str(interval_s), "--docker", docker, "--parent", str(os.getpid())]
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,  # noqa: S603
                                     stderr=subprocess.DEVNULL)

    def samples(self) -> list[dict[str, Any]]:
        out = []
        for line in self.out.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                pass  # the line being written when we read
        return out

    def stop(self) -> list[dict[str, Any]]:
        """End the sampler (after one last sample) and return every sample it took."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.samples()


def _main(argv: list[str]) -> int:
    import argparse
    import signal

    p = argparse.ArgumentParser(prog="guard.py")
    p.add_argument("--run-id", required=True)
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--interval", type=float, default=DEFAULT_INTERVAL_S)
    p.add_argument("--docker", default="docker")
    p.add_argument("--parent", type=int, required=True)
    ns = p.parse_args(argv)
    stop = {"now": False}

    def on_term(_signum: int, _frame: Any) -> None:
        stop["now"] = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the job decides when sampling ends
    with ns.out.open("a") as fh:
        while True:
            fh.write(json.dumps(sample(ns.run_id, ns.docker), sort_keys=True) + "\n")
            fh.flush()
            if stop["now"] or os.getppid() != ns.parent:
                return 0
            deadline = time.monotonic() + ns.interval
            while not stop["now"] and time.monotonic() < deadline:
                time.sleep(min(0.1, ns.interval))
                if os.getppid() != ns.parent:
                    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
