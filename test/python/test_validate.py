"""upsim.validate_*: the validate commands in-process; workloads' rows as a DataFrame."""

import pytest

import upsim


def test_validate_workloads_returns_its_rows():
    v = upsim.validate_workloads(rows=["gpt-1.7b"])
    assert v.passed
    assert list(v.rows.columns) == ["source", "label", "gpus", "status", "measured_ms",
                                    "predicted_ms", "error", "message"]
    row = v.rows.iloc[0]
    assert row["source"] == "megatron" and row["status"] == "ok"
    assert row["error"] == pytest.approx(row["predicted_ms"] / row["measured_ms"] - 1.0)
    assert "gpt-1.7b" in v.text


def test_validate_memory_kernels_and_collectives_give_their_reports():
    for v in (upsim.validate_memory(), upsim.validate_kernels(), upsim.validate_collectives()):
        assert v.passed, v.text
        assert "geomean" in v.text or "in-sample" in v.text
    with pytest.raises(upsim.ConfigError, match="--no-such-option"):
        upsim.validate_kernels("--no-such-option")


def test_schema_is_a_dataframe_of_the_readers_keys():
    s = upsim.schema("workload.parallelism")
    tensor = s[s["key"] == "workload.parallelism.tensor"].iloc[0]
    assert tensor["read_as"] == ["an integer"]
    assert tensor["defaults"] == ["1"]
    assert tensor["families"] == ["transformer"]
    assert tensor["meaning"].startswith("tensor-parallel degree")
    assert all(s["meaning"] != "")
    assert all(k.startswith("workload.parallelism.") for k in s["key"])
