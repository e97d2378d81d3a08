"""Run every benchmark (``benchmarks/bench_*.py``) in turn; ``make bench`` calls this.

Each benchmark is a standalone script that prints its own table and writes its figures as JSON
to ``bench-output/``. Pass ``--only NAME`` to run one (e.g. ``--only decorator``), and
``--quick`` for smaller sizes when you only want to see that they run.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
QUICK_ARGS = {
    "decorator": ["--calls", "5000", "--rounds", "5"],
    "encoder": ["--spans", "1280", "--rounds", "3"],
    "kill": ["--seconds", "1.5", "--runs", "1"],
    "forensics": ["--spans", "50000"],
    "json_readers": ["--spans", "50000"],
    "clickhouse": ["--spans", "50000"],
    "guards": ["--writes", "2000", "--increments", "20"],
    "watch": ["--spans", "50000"],
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", action="append", default=[], help="run only this benchmark (repeatable)")
    parser.add_argument("--quick", action="store_true", help="small sizes, to check the scripts run")
    ns = parser.parse_args(argv)
    scripts = sorted(HERE.glob("bench_*.py"))
    failed = []
    for script in scripts:
        name = script.stem.removeprefix("bench_")
        if ns.only and name not in ns.only:
            continue
        extra = QUICK_ARGS.get(name, []) if ns.quick else []
        print(f"== {name} ==", flush=True)
        if subprocess.run([sys.executable, str(script), *extra]).returncode != 0:
            failed.append(name)
    if failed:
        print(f"benchmarks failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
