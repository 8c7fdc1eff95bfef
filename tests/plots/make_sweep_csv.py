#!/usr/bin/env python3
"""Writes a small sweep table by running `zerosim simulate --json -` once per point, the shape
`zerosim sweep --out FILE.csv` gives: scenario columns, then the metrics; a point that does not
fit keeps its row with fits=false and the error message.

    make_sweep_csv.py ZEROSIM OUT.csv
"""

import csv
import json
import os
import subprocess
import sys

COLUMNS = ["model", "zero.stage", "cluster.nodes", "parallel.tp", "step_time_s", "tokens_per_s",
           "mfu", "peak_memory_bytes", "fits", "exposed_comm_dp_s", "exposed_comm_tp_s",
           "bubble_s", "error"]


def main():
    zerosim, out = sys.argv[1], sys.argv[2]
    # A scenario file, so that keys not set here take the registry defaults (TP 1, PP 1).
    base = os.path.join(os.path.dirname(os.path.abspath(out)), "sweep_base.json")
    with open(base, "w", encoding="utf-8") as f:
        json.dump({"model": "llama2-7b", "cluster": {"preset": "dgx-h100", "nodes": 1},
                   "training": {"micro_batch_size": 1, "global_batch_size": 256}}, f)
    rows = []
    for stage in (0, 1, 2, 3):
        for nodes in (1, 2, 4, 8):
            cmd = [zerosim, "simulate", base, "--zero", str(stage), "--nodes", str(nodes),
                   "--json", "-"]
            p = subprocess.run(cmd, capture_output=True, text=True)
            row = {"model": "llama2-7b", "zero.stage": stage, "cluster.nodes": nodes,
                   "parallel.tp": 1}
            if p.returncode == 0:
                r = json.loads(p.stdout)
                b = r["breakdown_s"]
                row.update(step_time_s=r["step_time_s"], tokens_per_s=r["tokens_per_s"],
                           mfu=r["mfu"], peak_memory_bytes=r["memory_per_gpu_bytes"]["peak"],
                           fits="true" if r["fits_in_memory"] else "false",
                           exposed_comm_dp_s=b["exposed_comm_by_group"]["dp"],
                           exposed_comm_tp_s=b["exposed_comm_by_group"]["tp"],
                           bubble_s=b["bubble"], error="")
            elif p.returncode == 2:
                row.update(fits="false", error=p.stderr.strip().splitlines()[-1])
            else:
                sys.exit("zerosim failed (%d): %s\n%s" % (p.returncode, " ".join(cmd), p.stderr))
            rows.append(row)
    with open(out, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(rows)
    ok = sum(1 for r in rows if not r["error"])
    if ok < len(rows) // 2:
        sys.exit("only %d of %d points simulated" % (ok, len(rows)))


if __name__ == "__main__":
    main()
