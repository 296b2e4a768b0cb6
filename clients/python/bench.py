"""The Python client's cost, measured from Python in one run, interleaved:

- embedded: SubprocessSandbox(psych_bin=...).run("None") (psych run --events
  as a child) against `psych run --json -` as a whole process;
- server: SubprocessSandbox(host=...).run("None") against a psych serve with
  a warm pool, against `python3 -I -c pass`.

Usage (root, psych built): python3 clients/python/bench.py --psych bin/psych
--python /usr/bin/python3 [--runs 30] [--pool 2]. Prints p50 and p90 of each
and the ratios the issue's goals name (embedded <= 1.3x, server <= 0.6x).
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from psych_runtime import SubprocessSandbox  # noqa: E402
from tests.harness import Served  # noqa: E402
import tests.harness as harness  # noqa: E402


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p * (len(xs) - 1))))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--psych", required=True)
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--pool", type=int, default=2)
    a = ap.parse_args()
    psych = os.path.abspath(a.psych)
    harness.PSYCH_BIN, harness.SANDBOX_PYTHON = psych, a.python
    served = Served(["--pool", str(a.pool)])
    try:
        embedded = SubprocessSandbox(python_bin=a.python, psych_bin=psych)
        remote = SubprocessSandbox(host=served.unix)

        def client_embedded():
            r = embedded.run("None")
            assert r.failure is None, r.failure

        def cli_json():
            subprocess.run([psych, "run", "--json", "--python", a.python, "-"], input=b"None", stdout=subprocess.DEVNULL, check=True)

        def client_server():
            r = remote.run("None")
            assert r.failure is None and r.isolation.get("warm"), r.isolation

        def bare_python():
            subprocess.run([a.python, "-I", "-c", "pass"], check=True)

        rows = [("client embedded (psych run --events)", client_embedded), ("psych run --json (process)", cli_json),
                ("client via warm psych serve", client_server), ("python3 -I -c pass", bare_python)]
        for _, f in rows:  # warm caches once
            f()
        times = {name: [] for name, _ in rows}
        for i in range(a.runs):
            order = rows[i % len(rows):] + rows[:i % len(rows)]  # interleaved, rotated
            for name, f in order:
                t = time.perf_counter()
                f()
                times[name].append(time.perf_counter() - t)
                if name == "client via warm psych serve":
                    time.sleep(0.05)  # let the pool refill, as between requests
        print("%-40s %10s %10s" % ("row", "p50 ms", "p90 ms"))
        for name, _ in rows:
            print("%-40s %10.1f %10.1f" % (name, 1000 * pct(times[name], 0.5), 1000 * pct(times[name], 0.9)))
        med = {k: statistics.median(v) for k, v in times.items()}
        print("embedded / psych run --json: %.2fx (goal <= 1.3x)" % (med[rows[0][0]] / med[rows[1][0]]))
        print("warm server / python3 -I -c pass: %.2fx (goal <= 0.6x)" % (med[rows[2][0]] / med[rows[3][0]]))
    finally:
        served.stop()


if __name__ == "__main__":
    main()
