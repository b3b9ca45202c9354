"""upsim.validate_*: the validate commands in this process, with their rows as DataFrames."""

import io
import os
import tempfile
from typing import Optional, Sequence

from . import _core
from .result import _pandas


class ValidationResult:
    """A validate command's outcome: `text` (what it prints), `passed` (exit code 0: every
    bounded error within its bound), `exit_code`, and for workloads `rows` (one per published
    row: source, label, gpus, status, measured_ms, predicted_ms, error, message)."""

    def __init__(self, outcome, rows=None):
        self.text = outcome["stdout"]
        self.exit_code = outcome["exit_code"]
        self.passed = self.exit_code == 0
        self.rows = rows

    def __repr__(self) -> str:
        size = "" if self.rows is None else f", rows={len(self.rows)}"
        return f"upsim.ValidationResult(passed={self.passed}{size})"

    def _repr_html_(self) -> str:
        if self.rows is None:
            import html
            return f"<pre>{html.escape(self.text)}</pre>"
        return self.rows.to_html(index=False, max_rows=60)


def validate_workloads(rows: Optional[Sequence[str]] = None, jobs: int = 1,
                       max_gpus: int = 0) -> ValidationResult:
    """Published training steps (Megatron-LM SC'21, llm-foundry, NeMo, Nemotron-4,
    DeepLearningExamples) against their predictions, as ``upsim validate workloads``: `rows`
    keeps the rows whose `source: label` contains one of these substrings; `jobs` rows run at
    once; `max_gpus` skips larger rows (0: none). The full set takes about a minute per core."""
    args = ["--jobs", str(int(jobs)), "--max-gpus", str(int(max_gpus))]
    if rows:
        args += ["--rows", ",".join(rows)]
    with tempfile.TemporaryDirectory(prefix="upsim-validate-") as folder:
        csv = os.path.join(folder, "rows.csv")
        outcome = _core.validate("workloads", args + ["--csv", csv])
        with open(csv, encoding="utf-8") as f:
            table = _pandas().read_csv(io.StringIO(f.read()), keep_default_na=False,
                                       na_values=[""])
    return ValidationResult(outcome, table)


def validate_memory() -> ValidationResult:
    """Published per-GPU training memory against the memory estimate (``upsim validate
    memory``)."""
    return ValidationResult(_core.validate("memory", []))


def validate_kernels(*args: str) -> ValidationResult:
    """The kernel models against measured kernel times (``upsim validate kernels ARGS``; e.g.
    "--shipped" for every GPU generation's held-out tables)."""
    return ValidationResult(_core.validate("kernels", list(args)))


def validate_collectives(*args: str) -> ValidationResult:
    """The fabric and collective models against measured nccl-tests sweeps (``upsim validate
    collectives ARGS``)."""
    return ValidationResult(_core.validate("collectives", list(args)))
