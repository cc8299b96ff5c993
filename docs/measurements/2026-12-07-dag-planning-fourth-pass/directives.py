"""What each directive of the workflow's rules costs Snakemake alone: the checkpoint floor of
``benchmarks/bench_dag.py`` (504 configurations, 2 launches each and the A/A control: 3,029 trivial jobs),
then the same with one change at a time; ``snakemake --cores 1 -n all`` with nothing built, CPU medians of 3.

    nice -n 19 python3 docs/measurements/2026-12-07-dag-planning-fourth-pass/directives.py
"""

from __future__ import annotations

import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "benchmarks"))
import bench_dag  # noqa: E402

TOUCH = 'shell: "touch {output}"'


def every_rule(text: str, line: str) -> str:
    return text.replace(f"\n    {TOUCH}", f"\n{line}\n    {TOUCH}")


def variants(base: str) -> dict[str, str]:
    return {
        "floor (checkpoint)": base,
        "script: instead of shell:": base.replace(TOUCH, 'script: "../touch.py"'),
        "log: on every rule": re.sub(r'\n    output: "([^"]+)"\n    shell:',
                                     lambda m: f'\n    output: "{m[1]}"\n    log: "logs/{m[1]}.log"\n    shell:', base),
        "conda: on every rule": every_rule(base, '    conda: "../env.yaml"'),
        "a params function on every rule": every_rule(base, '    params: p=lambda wildcards: "x"'),
        "launch with 8 outputs": base.replace(
            '    output: "r/{c}/launch-{launch}/outcome.json"',
            '    output: "r/{c}/launch-{launch}/outcome.json",\n'
            '            *[f"r/{{c}}/launch-{{launch}}/f{i}.json" for i in range(7)]'),
    }


def cpu_of_dry_run(work: Path) -> tuple[float, str]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "-n", "all"], cwd=work,  # noqa: S603
                            capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        raise SystemExit(result.stderr[-3000:])
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, result.stdout


def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="directives-"))
    try:
        (root / "touch.py").write_text("from pathlib import Path\nfor f in snakemake.output:\n    Path(f).touch()\n")
        (root / "env.yaml").write_text("channels: [conda-forge]\ndependencies: [python=3.11]\n")
        base = bench_dag.floor_snakefile(504, 2, 1, checkpoint=True)
        for name, text in variants(base).items():
            if text == base and name != "floor (checkpoint)":
                raise SystemExit(f"{name}: the floor's rules changed, update this variant")
            work = root / re.sub(r"\W+", "-", name)
            work.mkdir()
            (work / "Snakefile").write_text(text)
            runs = [cpu_of_dry_run(work) for _ in range(3)]
            jobs = len(re.findall(r"^(?:local)?(?:rule|checkpoint) \w+:", runs[0][1], flags=re.M))
            cpus = [cpu for cpu, _ in runs]
            print(f"{name}: CPU median {statistics.median(cpus):.2f} s {[round(c, 2) for c in cpus]} "
                  f"({jobs} jobs listed)", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
