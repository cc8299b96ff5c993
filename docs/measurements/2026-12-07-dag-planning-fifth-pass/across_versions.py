"""A results tree recorded by the parent (8 declared outputs per launch), planned by this branch (1).

    python3 across_versions.py PARENT_CHECKOUT OUT_DIR

config.yaml: every output the parent's dry run lists is created (as bench_dag does: a JSON file an object,
a plan the plan it resolves to, a launch's files) and recorded with the parent's `snakemake --touch`, again
until its dry run has nothing to do; the
tree and its .snakemake/ are copied into a copy of this branch. Prints what `snakemake -n all` plans there
(nothing, if no measured launch reruns), then, with one configuration's plan edited (its env), the normalised
job lists of both checkouts on their own trees (same_jobs.normalised): the same jobs, only that configuration's.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

B = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(B), str(B / "benchmarks"), str(Path(__file__).resolve().parent)]
from bench_dag import SNAKEMAKE, launch_files, outputs_of_dry_run, resolved_plans, touched_content  # noqa: E402
from same_jobs import normalised  # noqa: E402

from specsweep.testing.workflow import copy_workflow  # noqa: E402

EDITED = "eagle3-shm"  # its positive control eagle3-shm-slow10 is made from it


def snakemake(work: Path, *args: str) -> str:
    out = subprocess.run([*SNAKEMAKE, *args], cwd=work, capture_output=True, text=True, check=False)  # noqa: S603
    if out.returncode != 0:
        raise SystemExit(f"{work}: snakemake {args} failed:\n{out.stderr[-3000:]}")
    return out.stdout + out.stderr


def recorded_tree(a: Path, work: Path) -> None:
    copy_workflow(work, repo=a)
    plans = resolved_plans(work)
    planned = snakemake(work, "-n", "all")
    for _ in range(4):  # the jobs behind the judgement's checkpoint show once the round before is recorded
        for path in outputs_of_dry_run(planned):
            if not Path(path).suffix:
                (work / path).mkdir(parents=True, exist_ok=True)
                continue
            (work / path).parent.mkdir(parents=True, exist_ok=True)
            (work / path).write_text(touched_content(path, plans))
            launch_files(work, path)
        snakemake(work, "--touch", "all")
        planned = snakemake(work, "-n", "all")
        if "Nothing to be done" in planned:
            return
    raise SystemExit(f"the parent's own tree is not up to date:\n{planned[-3000:]}")


def edit(work: Path) -> None:
    config = yaml.safe_load((work / "config.yaml").read_text())
    config["configurations"][EDITED].setdefault("env", {})["NCCL_BUFFSIZE"] = "4194304"
    (work / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))


def main(a: Path, out: Path) -> None:
    shutil.rmtree(out, ignore_errors=True)
    recorded_tree(a, out / "A")
    copy_workflow(out / "B", repo=B)
    for name in ("results", ".snakemake"):
        shutil.copytree(out / "A" / name, out / "B" / name, symlinks=True)
    text = snakemake(out / "B", "-n", "all")
    print("this branch on the parent's tree, snakemake -n all:",
          "Nothing to be done" if "Nothing to be done" in text else "jobs:\n" + "\n".join(normalised(text)))
    lists = {}
    for tag in ("A", "B"):
        edit(out / tag)
        lists[tag] = normalised(snakemake(out / tag, "-n", "all"))
    rules = sorted(line.split(" | ")[0] + "".join(f" {m}" for m in re.findall(r"wildcards=config=([a-z0-9_-]+)", line))
                   for line in lists["B"])
    print(f"{EDITED}'s env edited: {len(lists['A'])} jobs (parent) / {len(lists['B'])} (this branch), normalised "
          f"lists {'identical' if lists['A'] == lists['B'] else 'DIFFERENT'}: {', '.join(rules)}")


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve())
