"""upsim.schema: the scenario keys upsim's readers read, as a DataFrame."""

from typing import Optional, Sequence

from . import _core
from .result import _pandas


def schema(key: Optional[str] = None, scenarios: Sequence[str] = (),
           with_files: bool = False):
    """Every scenario key upsim's readers read while they build the shipped scenarios and
    starters (or `scenarios`), as ``upsim schema`` prints it: one row per key with its
    `meaning` (one line, as its reader publishes it), `read_as`
    (the type(s) its readers expect), `ranges`, `defaults` (empty: no default) and the workload
    `families` whose scenarios read it. `key` keeps the keys at or below a path
    ("workload.parallelism"); `with_files` adds the keys of referenced files (hardware profile,
    calibration, fabric)."""
    rows = _core.schema(key or "", [str(s) for s in scenarios], with_files)
    return _pandas().DataFrame(rows, columns=["key", "meaning", "read_as", "ranges", "defaults", "families",
                                              "in_referenced_file"])
