"""upsim.run: one scenario, to steady state, in this process."""

import json
import math
import os
from typing import Any, Mapping, Optional, Sequence, Union

from . import _core
from .result import Result

ScenarioInput = Union[str, "os.PathLike[str]", Mapping[str, Any]]
Overrides = Union[Mapping[str, Any], Sequence[str], None]


def _config_error(key: str, why: str) -> Exception:
    return _core.ConfigError(f"set: {key}: {why}")


def _override_value(key: str, value: Any) -> str:
    """A --set value as YAML text: strings as written (so '600GB/s' and 'hardware/h100.yaml'
    read as upsim's own syntax), booleans as true/false, numbers and containers as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and not math.isfinite(value):
        raise _config_error(key, f"{value!r} is not a finite number")
    if value is None or isinstance(value, (int, float, list, tuple, dict)):
        return json.dumps(value)
    raise _config_error(key, f"a {type(value).__name__} cannot be written as a scenario value")


def _assignments(overrides: Overrides) -> list:
    if overrides is None:
        return []
    if isinstance(overrides, Mapping):
        out = []
        for key, value in overrides.items():
            if not isinstance(key, str) or not key:
                raise _core.ConfigError(f"set: keys are dotted key paths (str), got {key!r}")
            out.append(f"{key}={_override_value(key, value)}")
        return out
    if isinstance(overrides, str):
        raise TypeError("set: give a dict {'a.b': value} or a list of 'a.b=value' strings")
    out = []
    for item in overrides:
        if not isinstance(item, str) or "=" not in item:
            raise _core.ConfigError(f"set: `{item}` is not an assignment 'a.b=value'")
        out.append(item)
    return out


def run(scenario: ScenarioInput, set: Overrides = None, *, base_dir: Optional[str] = None) -> Result:
    """Simulates `scenario` until its iterations are in steady state (as ``upsim run`` does) and
    returns a Result.

    scenario: a scenario file (str or path), or the scenario itself as a dict of the same keys
        as the YAML file; the files a dict refers to (hardware, topology, calibration, traces)
        resolve against `base_dir` (default: the working directory), as a file's resolve
        against the file's folder.
    set: overrides, as ``upsim run --set`` takes them: a dict {"platform.gpus": 8,
        "workload.global_batch": 2048} or a list of "key=value" strings; applied in order. A
        key no reader uses is an error, as on the command line.

    Raises upsim.ConfigError for bad input and upsim.SimulationError for a run that cannot
    complete. The run releases the GIL.
    """
    overrides = _assignments(set)
    if isinstance(scenario, Mapping):
        folder = os.fspath(base_dir) if base_dir is not None else os.getcwd()
        # The name errors give the document; its folder is where its references resolve.
        name = os.path.join(folder, "<dict>.yaml")
        try:
            text = json.dumps(scenario, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise _core.ConfigError(f"scenario dict: not a YAML document: {e}") from None
        documents = _core.run(name, overrides, text)
        source = "<dict>"
    else:
        if base_dir is not None:
            raise TypeError("base_dir is for a scenario given as a dict; a file's references "
                            "resolve against its own folder")
        path = os.fspath(scenario)
        documents = _core.run(path, overrides, None)
        source = path
    return Result(documents, source=source, overrides=overrides)
