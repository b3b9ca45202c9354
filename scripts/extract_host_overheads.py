#!/usr/bin/env python3
"""Extract the seed method's host overheads T1-T5 from PyTorch Kineto traces.

Usage: scripts/extract_host_overheads.py [--yaml] TRACE.json [TRACE.json ...]

Prints the global T1, T4 (mean duration of cudaLaunchKernel and of cudaMemcpyAsync), the defaults
(pooled over all ops) and the per-op mean T2 / T3 / T5 with sample counts, all in microseconds.
With --yaml it prints the per-op table as YAML for configs/host/.

Definitions (Lin et al., TPDS 2024, restated here; standard library only):
  * Events with a duration on the host process are nested by interval containment per thread
    (sorted by start ascending, duration descending). A root event of a secondary thread (the
    autograd thread) nests under the deepest label on the main thread that contains it.
  * Labels are user_annotation events (record_function scopes such as "## forward ##",
    "Optimizer.step#...", "ProfilerStep#N") and cpu_op events whose name starts with one of the
    seed's module markers. Ops are the top-level cpu_op events: no cpu_op ancestor but labels.
  * Everything that starts between a DataLoader event longer than 100 us and the next
    "## forward ##" label is dropped (data loading). The DataLoader event itself is kept as one
    body sample of its name (its duration minus 2 us per host event inside it): the host time
    of fetching a batch, which workload generators emit as a launch-free op; it is not pooled
    into the default body.
  * A launch is a cuda_runtime event named cudaLaunchKernel, cudaMemcpyAsync or
    cudaStreamSynchronize anywhere under the op. Runtime calls in IGNORED_RUNTIME are dropped
    entirely (neither launches nor sub-events; their time stays in the gap they sit in).
  * Profiler correction (the seed's only one): CPU_EVENT_OVERHEAD_US = 2 us per traced sub-event.
    n_before(launch_i) counts the op's sub-events (any depth) that start after the previous
    boundary (op start, or the end of launch_{i-1}) and before launch_i starts.
      T2 = start(launch_0) - start(op) - 2 * n_before(launch_0)
      T3 = max(0, end(op) - end(last launch) - 2 * (sub-events starting after the last launch))
      T5 = start(launch_i) - end(launch_{i-1}) - 2 * n_before(launch_i), one sample per gap;
           0 for an op with one launch; for an op without launches its whole duration minus
           2 * (number of its sub-events) (aten::to without sub-events is skipped).
      T1 = gap - 2 between consecutive ops on the same thread with the same parent, kept when
           2 < gap < 200 us.
  * T4: the seed uses a constant 4 us; here the mean measured duration of the launch call is
    reported instead (no correction, no outlier removal), the seed's constant printed beside it.
  * Cleaning: negative samples are clamped to 0, then Tukey's rule ([Q1 - 1.5 IQR, Q3 + 1.5 IQR],
    linear-interpolated quartiles) per (op, T-type) and for T1, over the samples of all traces
    pooled (the seed's "shared overheads" mode, keyed by op name only).
"""

import json
import statistics
import sys

CPU_EVENT_OVERHEAD_US = 2.0
SEED_T4_US = 4.0  # seed: KERNEL_LAUNCH_LENGTH 10 - CPU_EVENT_OVERHEAD 2 - GPU_EVENT_OVERHEAD 4
T1_MIN_GAP_US = 2.0
T1_MAX_GAP_US = 200.0
DATALOADER_MIN_US = 100.0
LAUNCH_NAMES = ("cudaLaunchKernel", "cudaMemcpyAsync", "cudaStreamSynchronize")
IGNORED_RUNTIME = (
    "cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags",
    "cudaPeekAtLastError",
    "cudaStreamGetCaptureInfo",
    "cudaEventQuery",
    "cudaEventRecord",
)
MODULE_MARKERS = ("##", "__", "module::", "DLRM ", "DistributedDataParallel")


class Node:
    def __init__(self, event):
        self.name = event["name"]
        self.cat = event.get("cat", "")
        self.tid = event["tid"]
        self.start = float(event["ts"])
        self.end = self.start + float(event["dur"])
        self.dur = float(event["dur"])
        self.parent = None
        self.children = []

    def is_label(self):
        return self.cat == "user_annotation" or (
            self.cat == "cpu_op" and self.name.startswith(MODULE_MARKERS))

    def is_op(self):
        return self.cat == "cpu_op" and not self.is_label()

    def is_launch(self):
        return self.cat == "cuda_runtime" and self.name in LAUNCH_NAMES


def load_host_events(path, loader_samples):
    with open(path) as f:
        trace = json.load(f)
    events = [e for e in trace["traceEvents"]
              if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "cuda_runtime",
                                                         "user_annotation")]
    events = [e for e in events
              if not (e["cat"] == "cuda_runtime" and e["name"] in IGNORED_RUNTIME)]
    # Data loading: from each long DataLoader event to the next forward label.
    long_loaders = [e for e in events
                    if "DataLoader" in e["name"] and e["dur"] > DATALOADER_MIN_US]
    for loader in long_loaders:
        inside = sum(1 for e in events if e is not loader and e["tid"] == loader["tid"]
                     and loader["ts"] <= e["ts"] < loader["ts"] + loader["dur"])
        loader_samples.setdefault(loader["name"], []).append(
            loader["dur"] - CPU_EVENT_OVERHEAD_US * inside)
    loaders = sorted(e["ts"] for e in long_loaders)
    forwards = sorted(e["ts"] for e in events if e["name"].lower() == "## forward ##")
    skipped = []
    for start in loaders:
        later = [f for f in forwards if f > start]
        if later:
            skipped.append((start, later[0]))
    events = [e for e in events if not any(s <= e["ts"] < t for s, t in skipped)]
    return [Node(e) for e in events]


def build_forest(nodes):
    """Nests nodes by containment per thread; returns (roots, main thread id)."""
    nodes.sort(key=lambda n: (n.start, -n.dur))
    labels = [n for n in nodes if n.cat == "user_annotation"]
    main_tid = labels[0].tid if labels else nodes[0].tid
    stacks = {}
    roots = []
    for node in nodes:
        stack = stacks.setdefault(node.tid, [])
        while stack and node.start >= stack[-1].end:
            stack.pop()
        if stack and node.end <= stack[-1].end:
            node.parent = stack[-1]
        elif node.tid != main_tid:
            # The autograd thread's roots belong to the main thread's enclosing label.
            main_stack = [n for n in stacks.get(main_tid, [])
                          if n.is_label() and n.start <= node.start and node.end <= n.end]
            node.parent = main_stack[-1] if main_stack else None
        if node.parent is not None:
            node.parent.children.append(node)
        else:
            roots.append(node)
        stack.append(node)
    return roots


def collect_ops(nodes, out):
    for node in nodes:
        if node.is_op():
            out.append(node)
        elif node.is_label():
            collect_ops(node.children, out)


def descendants(node):
    out = []
    for child in node.children:
        out.append(child)
        out.extend(descendants(child))
    return sorted(out, key=lambda n: (n.start, -n.dur))


def op_samples(op, samples):
    """Appends the op's T2/T3/T5 samples to samples[op name][t-type]."""
    subs = descendants(op)
    launches = [n for n in subs if n.is_launch()]
    per_op = samples.setdefault(op.name, {"t2": [], "t3": [], "t5": []})
    if not launches:
        if op.name == "aten::to" and not subs:
            return
        per_op["t5"].append(op.dur - CPU_EVENT_OVERHEAD_US * len(subs))
        return
    boundary = op.start
    for i, launch in enumerate(launches):
        n_before = sum(1 for n in subs if boundary <= n.start < launch.start and n is not launch)
        gap = launch.start - boundary - CPU_EVENT_OVERHEAD_US * n_before
        if i == 0:
            per_op["t2"].append(gap)
        else:
            per_op["t5"].append(gap)
        boundary = launch.end
    if len(launches) == 1:
        per_op["t5"].append(0.0)
    trailing = sum(1 for n in subs if n.start >= boundary)
    per_op["t3"].append(max(0.0, op.end - boundary - CPU_EVENT_OVERHEAD_US * trailing))


def t1_samples(ops, out):
    by_thread = {}
    for op in ops:
        by_thread.setdefault(op.tid, []).append(op)
    for thread_ops in by_thread.values():
        thread_ops.sort(key=lambda n: n.start)
        for prev, cur in zip(thread_ops, thread_ops[1:]):
            if prev.parent is not cur.parent:
                continue
            gap = cur.start - prev.end
            if T1_MIN_GAP_US < gap < T1_MAX_GAP_US:
                out.append(gap - CPU_EVENT_OVERHEAD_US)


def tukey(values):
    values = [max(0.0, v) for v in values]
    if len(values) < 4:
        return values
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    lo, hi = q1 - 1.5 * (q3 - q1), q3 + 1.5 * (q3 - q1)
    return [v for v in values if lo <= v <= hi]


def mean(values):
    return statistics.fmean(values) if values else float("nan")


def print_yaml(paths, t1, t4, pooled, cleaned):
    """Prints a configs/host/ overhead file (the schema read by calibration/host_overhead_cpu_cost)."""
    print("# Host overheads T1-T5 (Lin et al., TPDS 2024), measured by")
    print(f"# scripts/extract_host_overheads.py --yaml on {len(paths)} traces:")
    for path in paths:
        print(f"#   {path.rsplit('/', 1)[-1]}")
    print("# Every value below is a mean in microseconds from that run; n = samples after cleaning.")
    print(f"t1: {mean(t1):.3f}us  # gap between consecutive ops, n = {len(t1)}")
    print(f"t4: {mean(t4):.3f}us  # mean cudaLaunchKernel duration, n = {len(t4)}")
    print("default:  # all ops pooled; used for ops missing from `ops`")
    comments = {
        "t2": "op start to first launch, ops with launches",
        "t3": "last launch end to op end, ops with launches",
        "t5": "gap between launches (0 for single-launch ops)",
        "body": "whole host time of ops without launches",
    }
    for key in ("t2", "t3", "t5", "body"):
        print(f"  {key}: {mean(pooled[key]):.3f}us  # {comments[key]}, n = {len(pooled[key])}")
    print("ops:  # per op name; n(t2,t3,t5) = samples")
    for name in sorted(cleaned):
        c = cleaned[name]
        fields = [f"{t}: {mean(c[t]):.3f}us" for t in ("t2", "t3", "t5") if c[t]]
        counts = ",".join(str(len(c[t])) for t in ("t2", "t3", "t5"))
        print(f"  \"{name}\": {{{', '.join(fields)}}}  # n = {counts}")


def main(argv):
    as_yaml = "--yaml" in argv
    paths = [a for a in argv if a != "--yaml"]
    if not paths:
        print(__doc__.splitlines()[2], file=sys.stderr)
        return 2
    samples = {}
    loader_samples = {}
    t1 = []
    launch_durations = {"cudaLaunchKernel": [], "cudaMemcpyAsync": []}
    for path in paths:
        nodes = load_host_events(path, loader_samples)
        for n in nodes:
            if n.name in launch_durations:
                launch_durations[n.name].append(n.dur)
        roots = build_forest(nodes)
        ops = []
        collect_ops(roots, ops)
        for op in ops:
            op_samples(op, samples)
        t1_samples(ops, t1)

    cleaned = {name: {t: tukey(v) for t, v in per_op.items()} for name, per_op in samples.items()}
    t1_clean = tukey(t1)
    # Defaults: every cleaned sample of every op pooled. The T5 default pools the gaps between
    # launches (ops with launches); the body default pools whole bodies of ops without launches.
    launching = [c for name, c in cleaned.items() if samples[name]["t2"]]
    pooled = {
        "t2": [v for c in launching for v in c["t2"]],
        "t3": [v for c in launching for v in c["t3"]],
        "t5": [v for c in launching for v in c["t5"]],
        "body": [v for name, c in cleaned.items() if not samples[name]["t2"] for v in c["t5"]],
    }
    # Data loading: launch-free bodies of their own, outside the defaults.
    for name, values in loader_samples.items():
        cleaned.setdefault(name, {"t2": [], "t3": [], "t5": []})["t5"] += tukey(values)

    if as_yaml:
        print_yaml(paths, t1_clean, launch_durations["cudaLaunchKernel"], pooled, cleaned)
        return 0
    print(f"# traces: {len(paths)}")
    print(f"t1: mean {mean(t1_clean):.3f} us, std {statistics.pstdev(t1_clean):.3f}, "
          f"n {len(t1_clean)} (raw before Tukey: mean {mean(t1):.3f}, n {len(t1)})")
    for name, durs in launch_durations.items():
        print(f"t4 {name}: mean {mean(durs):.3f} us, n {len(durs)} (seed constant {SEED_T4_US})")
    for key, values in pooled.items():
        print(f"default {key}: mean {mean(values):.3f} us, n {len(values)}")
    print(f"{'op':<80} {'t2':>8} {'t3':>8} {'t5':>8}  n(t2,t3,t5)")
    for name in sorted(cleaned):
        c = cleaned[name]
        print(f"{name:<80} {mean(c['t2']):8.3f} {mean(c['t3']):8.3f} {mean(c['t5']):8.3f}  "
              f"{len(c['t2'])},{len(c['t3'])},{len(c['t5'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
