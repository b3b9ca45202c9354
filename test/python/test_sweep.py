"""upsim.sweep: a study run in-process, its results.csv as a DataFrame, resumable."""

import os

import pytest

import upsim


def _study(tmp_path):
    base = os.path.abspath("configs/dlrm_4gpu.yaml")
    study = tmp_path / "batches.yaml"
    study.write_text(
        "study: batches\n"
        f"base: {base}\n"
        "set:\n  simulation.iterations: 4\n  simulation.warmup_iterations: 2\n"
        "axes:\n  workload.global_batch: [2048, 4096]\n")
    return study


def test_sweep_returns_the_results_table_and_matches_single_runs(tmp_path):
    s = upsim.sweep(_study(tmp_path), out=tmp_path / "out", jobs=2)
    assert s.exit_code == 0
    r = s.results
    assert list(r["point"]) == [0, 1]
    assert list(r["workload.global_batch"]) == [2048, 4096]
    assert list(r["status"]) == ["ok", "ok"]
    assert len(s.failed) == 0
    one = upsim.run("configs/dlrm_4gpu.yaml",
                    set={"simulation.iterations": 4, "simulation.warmup_iterations": 2,
                         "workload.global_batch": 2048})
    assert r["iteration_ms"][0] == pytest.approx(one.iteration_ms, abs=1e-9)
    # The printed table: a header with the axis and the main numbers, one line per point.
    assert "workload.global_batch" in s.text and "iteration ms" in s.text
    assert "study batches: 2 points (2 run now, 0 resumed): 2 ok" in s.text
    assert repr(s).startswith("upsim.SweepResult(")


def test_sweep_resumes_and_refuses_bad_jobs(tmp_path):
    study = _study(tmp_path)
    upsim.sweep(study, out=tmp_path / "out")
    again = upsim.sweep(study, out=tmp_path / "out")
    assert "2 points (0 run now, 2 resumed)" in again.text
    assert "resuming" in again.log
    with pytest.raises(upsim.ConfigError, match="jobs"):
        upsim.sweep(study, jobs=0)
    with pytest.raises(upsim.ConfigError, match="missing_study.yaml"):
        upsim.sweep(tmp_path / "missing_study.yaml")


def test_results_h5_reads_with_pandas_as_results_csv(tmp_path):
    # pandas.read_hdf needs PyTables (Debian's python3-tables, which scripts/setup.sh installs).
    pytest.importorskip("tables", reason="PyTables (python3-tables) is not installed")
    import pandas as pd

    base = os.path.abspath("configs/dlrm_4gpu.yaml")
    study = tmp_path / "kinds.yaml"
    study.write_text(
        "study: kinds\n"
        f"base: {base}\n"
        "set:\n  simulation.iterations: 4\n  simulation.warmup_iterations: 2\n"
        "axes:\n  workload.loss_to_host: [false, true]\n  workload.global_batch: [2048, -1]\n")
    s = upsim.sweep(study, out=tmp_path / "out")
    assert list(s.results["status"]) == ["ok", "failed", "ok", "failed"]
    csv = pd.read_csv(tmp_path / "out" / "results.csv")
    h5 = pd.read_hdf(tmp_path / "out" / "results.h5", "results")
    pd.testing.assert_frame_equal(h5, csv, check_exact=True)
    pd.testing.assert_frame_equal(pd.read_hdf(tmp_path / "out" / "results.h5"), csv)
    pd.testing.assert_frame_equal(h5, s.results, check_exact=True)
    dtypes = h5.dtypes.astype(str).to_dict()
    assert dtypes["point"] == "int64"
    assert dtypes["workload.loss_to_host"] == "bool"
    assert dtypes["workload.global_batch"] == "int64"
    assert dtypes["iteration_ms"] == "float64"  # NaN where a point failed
    assert dtypes["status"] == "object" and dtypes["message"] == "object"
    assert isinstance(h5["status"][0], str)
    assert h5["message"].isna().tolist() == csv["message"].isna().tolist()
