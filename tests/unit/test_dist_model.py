"""bench/dist_model.py models a release build from one measured set of units (issue 34): units
cost the CPU their row kept busy, not their wall time under an oversubscribed ninja, and a dist row
that took less CPU than local adds no negative overhead."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RMSNORM = REPO / "kernels" / "rmsnorm"


@pytest.fixture(scope="module")
def dist_model():
    sys.path.insert(0, str(REPO))
    spec = importlib.util.spec_from_file_location("dist_model", REPO / "bench" / "dist_model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def row(seconds: dict, busy: float | None, **extra) -> dict:
    return {"units": [{"source": s, "seconds": t} for s, t in seconds.items()],
            **({"busy_cpu_seconds": busy} if busy is not None else {}), **extra}


def test_units_cost_the_cpu_their_row_kept_busy(dist_model):
    # 4 jobs on 2 cores: each unit's wall time is twice its CPU
    costs, scale = dist_model.unit_costs(row({"a.cu": 200.0, "b.cu": 240.0}, busy=220.0))
    assert scale == pytest.approx(0.5) and costs == pytest.approx({"a.cu": 100.0, "b.cu": 120.0})
    assert dist_model.unit_costs(row({"a.cu": 10.0}, busy=None)) == ({"a.cu": 10.0}, 1.0)


def test_dist_overhead_is_the_cpu_beyond_local_and_never_negative(dist_model):
    local = row({"a.cu": 100.0, "b.cu": 100.0}, busy=200.0)
    more = row({"a.cu": 90.0, "b.cu": 90.0}, busy=230.0, servers_cpu_seconds=210.0)
    assert dist_model._dist_costs(local, more) == pytest.approx((15.0, 10.0))
    less = row({"a.cu": 90.0, "b.cu": 90.0}, busy=190.0, servers_cpu_seconds=180.0)
    assert dist_model._dist_costs(local, less) == pytest.approx((0.0, 5.0))
    assert dist_model._dist_costs(local, None) == (0.0, 0.0)


def test_the_model_of_a_kernel_schedules_its_units_per_variant_and_per_arch(dist_model):
    release = dist_model.release_jobs(RMSNORM)
    assert release["units"] and release["variants"]
    measured = {u: 20.0 for u in release["units"]}  # 10 core-s each once scaled
    local = row(measured, busy=10.0 * len(measured))
    dist = row(measured, busy=10.0 * len(measured), servers_cpu_seconds=9.0 * len(measured))
    result = dist_model.model(RMSNORM, local, dist, cores=4, machines=(1, 8))
    jobs = [10.0 * len(archs) for archs in release["variants"].values() for _ in release["units"]]
    assert result["unit_cost_scale"] == pytest.approx(0.5)
    assert result["machines"]["1"]["seconds"] == pytest.approx(dist_model.makespan(jobs, 4), abs=0.1)
    per_arch = sum(len(a) for a in release["variants"].values()) * len(release["units"])
    eight = result["machines"]["8"]
    assert eight["jobs"] == per_arch and eight["client_seconds"] == pytest.approx(1.0 * per_arch / 4, abs=0.1)
    assert result["overhead_per_job_seconds"] == 0.0


def test_the_cli_models_a_result_again_for_machines_of_another_size(dist_model, tmp_path, capsys):
    release = dist_model.release_jobs(RMSNORM)
    measured = {u: 20.0 for u in release["units"]}
    result = tmp_path / "dist.json"
    result.write_text(json.dumps({"host_cpus": 2, "rows": {"local": row(measured, busy=10.0 * len(measured))}}))
    assert dist_model.main([str(result), str(RMSNORM), "--cores", "16", "--write"]) == 0
    assert "machine(s) of 16 cores" in capsys.readouterr().out
    assert json.loads(result.read_text())["model"]["cores_per_machine"] == 16
    for args, message in (([str(tmp_path / "none.json"), str(RMSNORM)], "is not a bench/dist_compile.py result"),
                          ([str(result), str(tmp_path)], "has no build.toml"),
                          ([str(result), str(RMSNORM), "--cores", "0"], "must be 1 or more")):
        with pytest.raises(SystemExit):
            dist_model.main(args)
        assert message in capsys.readouterr().err
