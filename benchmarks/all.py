"""Every benchmark in one run: engine events/s against bare SimPy, each seed story's wall time
at full size, sweep throughput on 1 vs 2 workers, and the memory a run adds at two lengths.
Prints figures and ratios only.

    python benchmarks/all.py
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    rc = 0
    print(f"load average before: {os.getloadavg()[0]:.1f} (figures from a busy machine are low)")
    for script, args in (("engine.py", ["--repeat", "3"]), ("stories.py", []), ("sweep.py", []), ("memory.py", [])):
        print(f"\n== {script} {' '.join(args)}", flush=True)
        rc |= subprocess.call([sys.executable, str(HERE / script), *args])
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
