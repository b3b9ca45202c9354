#!/usr/bin/env python3
"""Re-renders the runs of nccl_tests_allreduce_published.csv in nccl-tests' own stdout layout.

Writes test/data/nccl-tests/<run_id>.log, one per run, from the CSV in that folder. The figures (size, count, type, redop,
out-of-place and in-place time / algbw / busbw) are the transcribed CSV fields, printed with the
formats of NVIDIA/nccl-tests src/common.cu at tag v2.16.7:
  row preamble  "%12li  %12li  %8s  %6s  %6s"  (size, count, type, redop, root)
  each place    "  %7s  %6.2f  %6.2f  %5g"     (time, algbw, busbw, #wrong); the time string is
                %7.0f from 10000 us, %7.1f from 100 us, %7.2f below
  rank lines    "#  Rank %2d Group %2d Pid %6d on %10s device %2d [%04x:%02x:%02x] %s"
Host names, pids and PCI ids are placeholders (the CSV does not have them); warmup / iteration
counts are nccl-tests' defaults unless the run's command says otherwise. The GCP run keeps the
layout of its source file (no "# Collective test starting:" line, as before nccl-tests 2.16.7);
the OCI runs get the 2.16.7 layout, which has that line. Deterministic: rerunning it rewrites
the same bytes.

Usage: scripts/render_nccl_tests_logs.py   (from any folder)
"""
import csv
import os

DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "data", "nccl-tests")

# run_id -> (minBytes, maxBytes, step text, warmup, iters, with "Collective test starting")
RUNS = {
    # all_reduce_perf -b 8 -e 8G -f 2 -g 1; the source prints "warmup iters: 5 iters: 20".
    "gcp_a3mega_2x8_h100_tcpxo": (8, 8589934592, "2(factor)", 5, 20, False),
    # all_reduce_perf -b 1G -e 16G -f 2
    "oci_bm.gpu.h100.8_2x8_rocev2": (1073741824, 17179869184, "2(factor)", 5, 20, True),
    # all_reduce_perf -b 10G -e 10G (no -f: nccl-tests steps by 1 MiB)
    "oci_bm.gpu4.8_1x8_a100_40gb": (10737418240, 10737418240, "1048576(bytes)", 5, 20, True),
    "oci_bm.gpu4.8_2x8_a100_40gb_rocev2": (10737418240, 10737418240, "1048576(bytes)", 5, 20,
                                           True),
}


def time_str(text):
    value = float(text)
    if value >= 10000.0:
        return "%7.0f" % value
    if value >= 100.0:
        return "%7.1f" % value
    return "%7.2f" % value


def render(run_id, rows):
    min_bytes, max_bytes, step, warmup, iters, starting = RUNS[run_id]
    ranks = int(rows[0]["n_ranks"])
    nodes = int(rows[0]["n_nodes"])
    per_node = ranks // nodes
    out = []
    if starting:
        out.append("# Collective test starting: all_reduce_perf")
    out.append("# nThread 1 nGpus 1 minBytes %d maxBytes %d step: %s warmup iters: %d iters: %d "
               "agg iters: 1 validation: 1 graph: 0" % (min_bytes, max_bytes, step, warmup, iters))
    out.append("#")
    out.append("# Using devices")
    for r in range(ranks):
        host = "node-%d" % (r // per_node)
        out.append("#  Rank %2d Group %2d Pid %6d on %10s device %2d [%04x:%02x:%02x] %s" %
                   (r, 0, 1000 + r, host, r % per_node, 0, r % per_node, 0, rows[0]["gpu"]))
    out.append("#")
    out.append("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place"
               "          " % ("", "", "", "", ""))
    out.append("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s" %
               ("size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong",
                "time", "algbw", "busbw", "#wrong"))
    out.append("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s" %
               ("(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)",
                "(GB/s)", ""))
    busbw = []
    for row in rows:
        line = "%12li  %12li  %8s  %6s  %6s" % (int(row["size_bytes"]), int(row["count"]),
                                                row["type"], row["redop"], "%6i" % -1)
        for place in ("oop", "ip"):
            algbw = float(row[place + "_algbw_GBps"])
            bus = float(row[place + "_busbw_GBps"])
            busbw.append(bus)
            line += "  %7s  %6.2f  %6.2f  %5g" % (time_str(row[place + "_time_us"]), algbw, bus, 0)
        out.append(line)
    out.append("# Out of bounds values : 0 OK")
    out.append("# Avg bus bandwidth    : %g " % (sum(busbw) / len(busbw)))
    out.append("#")
    if starting:
        out.append("# Collective test concluded: all_reduce_perf")
    return "\n".join(out) + "\n"


def main():
    runs = {}
    with open(os.path.join(DATA_DIR, "nccl_tests_allreduce_published.csv"), newline="") as f:
        lines = [line for line in f if not line.startswith("#")]
    for row in csv.DictReader(lines):
        runs.setdefault(row["run_id"], []).append(row)
    for run_id, rows in runs.items():
        with open(os.path.join(DATA_DIR, run_id + ".log"), "w", newline="\n") as f:
            f.write(render(run_id, rows))


if __name__ == "__main__":
    main()
