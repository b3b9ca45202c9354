"""upsim.run: the Python package runs scenarios in-process and returns what `upsim run` writes."""

import json
import os
import subprocess
import tempfile

import pandas as pd
import pytest

import upsim

DLRM = "configs/dlrm_4gpu.yaml"


@pytest.fixture(scope="module")
def dlrm():
    return upsim.run(DLRM)


def test_run_predicts_the_golden_iteration_time(dlrm):
    # test/golden/dlrm_4gpu: 4.0859 ms, printed with 4 decimals.
    assert dlrm.iteration_ms == pytest.approx(4.0859, abs=5e-5)
    assert dlrm.name == "dlrm_4gpu"
    assert "predicted iteration time: 4.0859 ms" in dlrm.text


def test_tables_are_dataframes_with_the_documented_columns(dlrm):
    assert isinstance(dlrm.ranks, pd.DataFrame)
    assert list(dlrm.ranks["rank"]) == [0, 1, 2, 3]
    for column in ["name", "iteration_time_ms", "compute_ms", "exposed_communication_ms"]:
        assert column in dlrm.ranks.columns
    assert dlrm.ranks["iteration_time_ms"].max() == pytest.approx(dlrm.iteration_ms, abs=1e-9)
    assert list(dlrm.links.columns[:2]) == ["name", "capacity_gbytes_per_s"]
    assert len(dlrm.links) > 0
    assert {"kind", "op", "name", "time_ms_per_iteration"} <= set(dlrm.ops.columns)
    assert dlrm.steps is None  # not a trace


def test_documents_match_the_command_line_run(dlrm):
    binary = os.environ.get("UPSIM_BINARY")
    if not binary:
        pytest.skip("UPSIM_BINARY not set (ctest sets it)")
    with tempfile.TemporaryDirectory() as folder:
        out = os.path.join(folder, "run")
        subprocess.run([binary, "run", DLRM, "--out", out, "--no-trace", "--quiet"], check=True,
                       stdout=subprocess.DEVNULL)
        for name, key in [("ranks.csv", "ranks_csv"), ("links.csv", "links_csv"),
                          ("ops.csv", "ops_csv"), ("summary.json", "summary_json"),
                          ("summary.txt", "summary_text"), ("scenario.yaml", "resolved_yaml")]:
            with open(os.path.join(out, name), encoding="utf-8") as f:
                assert f.read() == dlrm.documents[key], name


def test_overrides_as_a_dict_change_the_run_and_are_recorded():
    r = upsim.run(DLRM, set={"workload.global_batch": 2048, "simulation.iterations": 4,
                             "simulation.warmup_iterations": 2})
    assert r.summary["scenario"]["overrides"] == [
        "workload.global_batch=2048", "simulation.iterations=4",
        "simulation.warmup_iterations=2"]
    assert r.summary["iterations"]["simulated"] == 4
    assert r.iteration_ms < 4.0859


def test_a_scenario_dict_runs_like_its_file():
    scenario = {
        "name": "dlrm_dict",
        "platform": {
            "gpus": 4, "gpu": "hardware/a100_sxm4_40gb.yaml", "table_memory_fraction": 0.8,
            "kernels": {"model": "calibrated", "calibration": "calibration/a100_llmcompass.yaml"},
            "host": {"model": "host_overheads", "overheads": "host/v100_pytorch_kineto.yaml"},
            "topology": "topologies/a100x4_nvlink.yaml",
            "interconnect": {"model": "flow"},
        },
        "workload": {
            "model": "dlrm", "global_batch": 4096, "dtype": "fp32",
            "bottom_mlp": [512, 1024, 256, 128], "top_mlp": [1024, 512, 256, 1],
            "interaction": "dot",
            "embeddings": {"dim": 128, "index_bytes": 8, "tables": [
                {"count": 6, "rows": 4000000, "pooling": 30},
                {"count": 10, "rows": 2000000, "pooling": 20},
                {"count": 14, "rows": 500000, "pooling": 10},
                {"count": 18, "rows": 20000, "pooling": 2}]},
            "sharding": "size_lookup_greedy", "ddp_bucket": "25MiB", "optimizer": "sgd",
        },
    }
    r = upsim.run(scenario, base_dir="configs")
    assert r.name == "dlrm_dict"
    assert r.iteration_ms == pytest.approx(4.0859, abs=5e-5)


def test_bad_input_raises_config_error_naming_the_key():
    with pytest.raises(upsim.ConfigError, match="workload.no_such_key"):
        upsim.run(DLRM, set={"workload.no_such_key": 1})
    with pytest.raises(upsim.ConfigError, match="missing.yaml"):
        upsim.run("configs/missing.yaml")
    with pytest.raises(ValueError):  # ConfigError is a ValueError
        upsim.run(DLRM, set=["not an assignment"])
    with pytest.raises(upsim.ConfigError, match="finite"):
        upsim.run(DLRM, set={"workload.global_batch": float("nan")})


def test_repr_and_html_for_notebooks(dlrm):
    assert repr(dlrm).startswith("upsim.Result(scenario='dlrm_4gpu', iteration_ms=4.0859")
    page = dlrm._repr_html_()
    assert "4.0859 ms" in page and "<table" in page


def _three_step_kineto_trace():
    """A Kineto trace of rank 0 with three ProfilerSteps of 100, 300 and 100 us (as
    test/unit/tools/cli_test.cpp's TraceScenariosPrintEveryMeasuredStep)."""
    events = []
    t = 0
    correlation = 1
    for step in (1, 2, 3):
        kernel_us = 280 if step == 2 else 80
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}",
                       "pid": 100, "tid": 100, "ts": t, "dur": kernel_us + 20, "args": {}})
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 100,
                       "tid": 100, "ts": t + 2, "dur": 4, "args": {"correlation": correlation}})
        events.append({"ph": "X", "cat": "kernel", "name": "some_kernel", "pid": 0, "tid": 7,
                       "ts": t + 8, "dur": kernel_us,
                       "args": {"device": 0, "stream": 7, "correlation": correlation}})
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize",
                       "pid": 100, "tid": 100, "ts": t + 7, "dur": kernel_us + 5,
                       "args": {"correlation": correlation + 1}})
        correlation += 2
        t += kernel_us + 20
    return {"schemaVersion": 1, "traceEvents": events}


def test_a_trace_gives_its_measured_steps(tmp_path):
    traces = tmp_path / "steps"
    traces.mkdir()
    (traces / "rank0.json").write_text(json.dumps(_three_step_kineto_trace()))
    configs = os.path.abspath("configs")
    scenario = {
        "platform": {
            "gpu": f"{configs}/hardware/v100_sxm2_32gb.yaml",
            "kernels": {"model": "roofline"},
            "host": {"model": "host_overheads",
                     "overheads": f"{configs}/host/v100_pytorch_kineto.yaml"},
            "interconnect": {"model": "alpha_beta", "link": "nvlink2"},
        },
        "workload": {"model": "trace", "traces": "steps"},
    }
    r = upsim.run(scenario, base_dir=str(tmp_path))
    assert r.throughput is None  # a trace counts no tokens or samples
    steps = r.steps
    assert list(steps["step"]) == ["ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3"]
    assert list(steps["rank"]) == [0, 0, 0]
    assert list(steps["measured_ms"]) == pytest.approx([0.1, 0.3, 0.1], abs=1e-9)
