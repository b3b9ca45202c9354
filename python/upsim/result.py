"""upsim.Result: one run's results, as the files ``upsim run`` writes hold them."""

import html
import io
import json
from functools import cached_property
from typing import Any, Dict, List, Optional


def _pandas():
    try:
        import pandas
    except ImportError as e:  # pragma: no cover - depends on the interpreter
        raise ImportError(
            "upsim's tables are pandas DataFrames; install pandas for this interpreter "
            "(Debian: apt-get install python3-pandas)") from e
    return pandas


class Result:
    """One simulated run.

    Attributes (all computed from the run's documents, which `documents` holds as text):
      iteration_ms  predicted iteration time in ms (the slowest rank's mean measured iteration)
      throughput    tokens or samples per second, model / hardware TFLOP/s per GPU, MFU, HFU
                    (a dict; None for traces)
      summary       summary.json as a dict (schema "upsim.summary", README.md)
      text          the summary as ``upsim run`` prints it (summary.txt: every rank)
      warnings      the run's warnings, one sentence each
      scenario_yaml the resolved scenario (defaults written, overrides applied)
      ranks, links, ops
                    ranks.csv, links.csv and ops.csv as pandas DataFrames
      steps         for traces that record several steps: per step and rank the measured time
                    (a DataFrame: step, rank, measured_ms; NaN where the rank has no such
                    step); None otherwise
    """

    def __init__(self, documents: Dict[str, Any], source: str, overrides: List[str]):
        self.documents = documents
        self.source = source
        self.overrides = list(overrides)

    @cached_property
    def summary(self) -> Dict[str, Any]:
        return json.loads(self.documents["summary_json"])

    @property
    def iteration_ms(self) -> float:
        return float(self.summary["predicted_iteration_time_ms"])

    @property
    def throughput(self) -> Optional[Dict[str, Any]]:
        t = self.summary.get("throughput")
        if t is None:
            return None
        # Numbers as floats (JSON writes 708073 and 1.00247e+06 alike); None stays None.
        return {k: float(v) if isinstance(v, (int, float)) else v for k, v in t.items()}

    @property
    def name(self) -> str:
        return self.summary["scenario"]["name"]

    @property
    def text(self) -> str:
        return self.documents["summary_text"]

    @property
    def warnings(self) -> List[str]:
        return list(self.documents["warnings"])

    @property
    def scenario_yaml(self) -> str:
        return self.documents["resolved_yaml"]

    @cached_property
    def ranks(self):
        return _pandas().read_csv(io.StringIO(self.documents["ranks_csv"]))

    @cached_property
    def links(self):
        return _pandas().read_csv(io.StringIO(self.documents["links_csv"]))

    @cached_property
    def ops(self):
        return _pandas().read_csv(io.StringIO(self.documents["ops_csv"]),
                                  keep_default_na=False, na_values=[])

    @cached_property
    def steps(self):
        measured = self.summary.get("measured")
        if not measured or not measured.get("steps"):
            return None
        rows = []
        for step in measured["steps"]:
            for rank, ms in enumerate(step["ranks_measured_ms"]):
                # summary.json writes 0 for a rank without the step.
                rows.append({"step": step["label"], "rank": rank,
                             "measured_ms": ms if ms > 0 else float("nan")})
        return _pandas().DataFrame(rows, columns=["step", "rank", "measured_ms"])

    def __repr__(self) -> str:
        return (f"upsim.Result(scenario={self.name!r}, iteration_ms={self.iteration_ms:.4f}, "
                f"ranks={len(self.summary['ranks'])}, warnings={len(self.warnings)})")

    def _repr_html_(self) -> str:
        """Jupyter: the headline, the throughput, the warnings and the ranks table."""
        parts = [f"<b>upsim</b> {html.escape(self.name)}: predicted iteration "
                 f"<b>{self.iteration_ms:.4f} ms</b>"]
        t = self.throughput
        if t:
            line = f"{t['per_s']:.6g} {html.escape(t['unit'])}/s"
            if t.get("model_tflops_per_gpu") is not None:
                line += f", {t['model_tflops_per_gpu']:.4g} model TFLOP/s per GPU"
            if t.get("mfu") is not None:
                line += f", MFU {100.0 * t['mfu']:.1f}%"
            parts.append(line)
        for w in self.warnings:
            parts.append(f"<span style='color:#a60'>warning: {html.escape(w)}</span>")
        parts.append(self.ranks.to_html(index=False, max_rows=16))
        return "<br>".join(parts)
