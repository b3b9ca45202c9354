"""upsim.sweep: a what-if study (one base scenario at every point of a grid of overrides)."""

import io
import os
from typing import Optional

from . import _core
from .result import _pandas


class SweepResult:
    """A finished sweep: `results` (results.csv as a DataFrame: per point its axis values,
    status, iteration time and breakdown, memory, throughput, MFU; the columns are described in
    tools/sweep_command.h), `folder` (where results.csv, results.h5 and the row records are),
    `text` (what ``upsim sweep`` prints: the table and the summary line), `log` (its stderr:
    progress and reruns) and `failed` (points whose status is failed)."""

    def __init__(self, outcome):
        self.folder = outcome["folder"]
        self.text = outcome["stdout"]
        self.log = outcome["stderr"]
        self.exit_code = outcome["exit_code"]
        with open(os.path.join(self.folder, "results.csv"), encoding="utf-8") as f:
            self.results = _pandas().read_csv(io.StringIO(f.read()), keep_default_na=False,
                                              na_values=[""])

    @property
    def failed(self):
        return self.results[self.results["status"] == "failed"]

    def __repr__(self) -> str:
        counts = self.results["status"].value_counts().to_dict()
        return (f"upsim.SweepResult(folder={self.folder!r}, points={len(self.results)}, "
                f"status={counts})")

    def _repr_html_(self) -> str:
        return self.results.to_html(index=False, max_rows=40)


def sweep(study, out: Optional[str] = None, jobs: int = 1, force: bool = False,
          point_outputs: bool = False) -> SweepResult:
    """Runs a study file (configs/studies/*.yaml; its schema is in tools/sweep_command.h) as
    ``upsim sweep`` does, in this process: every point to steady state, on `jobs` threads,
    resumable (a folder holding this study's finished points runs only the rest). `out`: the
    results folder (default upsim-out/<study>/); `force`: replace another study's sweep files
    there. Points that fail are rows with status "failed" and their error as the message; input
    errors of the study itself raise upsim.ConfigError."""
    if not isinstance(jobs, int) or isinstance(jobs, bool) or jobs < 1:
        raise _core.ConfigError(f"sweep: jobs must be an integer of at least 1, got {jobs!r}")
    args = [os.fspath(study), "--jobs", str(jobs)]
    if out is not None:
        args += ["--out", os.fspath(out)]
    if force:
        args.append("--force")
    if point_outputs:
        args.append("--point-outputs")
    return SweepResult(_core.sweep(args))
