"""upsim from Python: run a scenario in this process and read its results as pandas DataFrames.

    >>> import upsim
    >>> r = upsim.run("configs/dlrm_4gpu.yaml")
    >>> r.iteration_ms
    4.0859...
    >>> r.ranks[["name", "iteration_time_ms", "exposed_communication_ms"]]
    >>> s = upsim.sweep("configs/studies/dlrm_gpu_generations.yaml", jobs=2)
    >>> s.results[["point", "platform.gpu", "status", "iteration_ms"]]

The simulation is upsim's own C++ library (the one the ``upsim`` command line uses), called
in-process: the same scenario gives the same tables as ``upsim run`` writes into its folder
(summary.json, ranks.csv, links.csv, ops.csv; their columns are described in
tools/run_tables.h). Bad input raises ``upsim.ConfigError`` (a ValueError) with the CLI's
message, naming the file, line or key; a run that cannot complete raises
``upsim.SimulationError`` (a RuntimeError).
"""

from ._core import ConfigError, SimulationError, __version__
from .result import Result
from .running import run
from .schema import schema
from .sweeping import SweepResult, sweep
from .validating import (ValidationResult, validate_collectives, validate_kernels,
                         validate_memory, validate_workloads)

__all__ = ["run", "sweep", "schema", "validate_workloads", "validate_memory", "validate_kernels",
           "validate_collectives", "Result", "SweepResult", "ValidationResult", "ConfigError",
           "SimulationError", "__version__"]
