"""`kbuild bench`: a kernel's benchmarks/ against its built variants, each workload beside its
reference in one process, with a table, JSON and an SVG plot. Real builds (g++), real runs: the
`kbuild init` scaffold (kbuild's own template), a file in Hugging Face's `kernels.benchmark`
convention with a wrong and a broken workload, and the corpus's relu benchmark unchanged.

Which variants run is `kbuild test`'s choice (builder/verify/variant_choice.py): the Python-only
kernel of tests/helpers/seen_kernel.py, whose benchmark records what its process saw, shows the
CPU variant benchmarked with every GPU hidden, the other backends left out in the loader's words,
and `--variant` running one anyway."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from builder.commands.main import main
from corpus import corpus_kernel
from seen_kernel import HIDDEN, WATCHED, build_seen, fresh_copy, seen


def commit(folder: Path) -> None:
    subprocess.run(["git", "init", "-q"], cwd=folder, check=True)
    subprocess.run(["git", "add", "-A"], cwd=folder, check=True)
    subprocess.run(["git", "-c", "user.email=t@localhost", "-c", "user.name=t", "commit", "-qm", "k"], cwd=folder,
                   check=True)


def cpu_variant(kernel: Path) -> str:
    (variant,) = [p.name for p in (kernel / "build").iterdir() if "-cpu-" in p.name]
    return variant


@pytest.fixture(scope="module")
def scaffold(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("bench")
    assert main(["init", "bscale", "--backends", "cpu", "--dir", str(root / "bscale")]) == 0
    kernel = root / "bscale"
    commit(kernel)
    assert main(["build", str(kernel)]) == 0
    return kernel


HF_STYLE = '''
import torch

from kernels.benchmark import Benchmark


class Mixed(Benchmark):
    seed = 1

    def setup(self):
        self.x = torch.randn(4096, device=self.device)

    def benchmark_right(self):
        self.out = self.kernel.scale(self.x, 3.0)

    def verify_right(self):
        return self.x * 3.0

    def benchmark_wrong(self):
        self.out = self.kernel.scale(self.x, 3.0)

    def verify_wrong(self):
        return self.x * 4.0

    def benchmark_broken(self):
        raise RuntimeError("no such op on this variant")

    def benchmark_untimed_reference(self):
        self.out = self.kernel.scale(self.x, 1.0)
'''


def test_the_scaffold_benchmarks_with_a_table_json_and_a_plot(scaffold, tmp_path, capsys):
    capsys.readouterr()
    out_json, plot = tmp_path / "bench.json", tmp_path / "bench.svg"
    code = main(["bench", str(scaffold), "--warmup", "1", "--repeats", "5", "--json", str(out_json),
                 "--plot", str(plot)])
    output = capsys.readouterr()
    assert code == 0, output
    doc = json.loads(out_json.read_text())
    (row,) = doc["workloads"]
    assert (row["script"], row["class"], row["name"], row["device"]) == ("benchmark.py", "ScaleBenchmark", "scale",
                                                                          "cpu")
    assert row["variant"] == cpu_variant(scaffold) and row["verified"] is True and row["error"] == ""
    for timing in (row["timing"], row["reference"]):
        assert 0 < timing["min_ms"] <= timing["median_ms"] <= timing["max_ms"]
    assert row["speedup"] == pytest.approx(row["reference"]["median_ms"] / row["timing"]["median_ms"])
    machine = doc["machines"][f"bscale/{row['variant']}"]
    assert machine["device"] == "cpu" and machine["repeats"] == 5 and machine["torch"]
    # the table names the workload and its check; the plot is an SVG with the workload's bar label
    assert "benchmark.py ScaleBenchmark.scale" in output.out and "matches" in output.out
    svg = ET.parse(plot).getroot()
    assert svg.tag.endswith("svg") and "ScaleBenchmark.scale" in plot.read_text()
    assert "<dc:date>" not in plot.read_text()  # reproducible: no date in it


def test_a_hugging_face_style_file_runs_and_wrong_or_broken_workloads_fail(scaffold, tmp_path, capsys):
    kernel = tmp_path / "bscale"
    shutil.copytree(scaffold, kernel, symlinks=True)
    (kernel / "benchmarks" / "benchmark_mixed.py").write_text(HF_STYLE)
    (kernel / "benchmarks" / "benchmark_missing.py").write_text("import no_such_module_here\n")
    out_json = tmp_path / "bench.json"
    capsys.readouterr()
    code = main(["bench", str(kernel), "--repeats", "2", "--warmup", "0", "--json", str(out_json)])
    output = capsys.readouterr()
    assert code == 1, output
    rows = {(r["script"], r["name"]): r for r in json.loads(out_json.read_text())["workloads"]}
    assert rows["benchmark_mixed.py", "right"]["verified"] is True
    assert rows["benchmark_mixed.py", "wrong"]["verified"] is False
    assert rows["benchmark_mixed.py", "wrong"]["max_abs_diff"] > 0.1  # |3x - 4x|: how far off it is
    broken = rows["benchmark_mixed.py", "broken"]
    assert broken["error"] == "RuntimeError: no such op on this variant" and broken["timing"] is None
    untimed = rows["benchmark_mixed.py", "untimed_reference"]
    assert untimed["verified"] is None and untimed["reference"] is None and untimed["timing"]["median_ms"] > 0
    assert rows["benchmark_missing.py", "-"]["error"] == "ModuleNotFoundError: No module named 'no_such_module_here'"
    assert rows["benchmark.py", "scale"]["verified"] is True  # the others still ran
    assert "DIFFERS (max |diff| " in output.out
    assert "benchmark_missing.py -.-: ModuleNotFoundError: No module named 'no_such_module_here'" in output.err


def test_bad_input_is_one_line(scaffold, tmp_path, capsys):
    empty = tmp_path / "nobench"
    shutil.copytree(scaffold, empty, symlinks=True)
    shutil.rmtree(empty / "benchmarks")
    capsys.readouterr()
    assert main(["bench", str(empty)]) == 2
    assert "no benchmarks/benchmark*.py in" in capsys.readouterr().err
    assert main(["bench", str(scaffold), "--variant", "torch99-cxx11-cpu-x86_64-linux"]) == 2
    assert "no built variant named torch99-cxx11-cpu-x86_64-linux" in capsys.readouterr().err
    # a misspelt name beside a right one is refused, not dropped, with the name it resembles
    built = sorted(p.name for p in (scaffold / "build").iterdir() if (p / "metadata.json").is_file())
    typo = built[0].replace("x86_64", "x86-64")
    assert main(["bench", str(scaffold), "--variant", built[0], "--variant", typo]) == 2
    err = capsys.readouterr().err
    assert f"no built variant named {typo} in" in err and f"did you mean --variant {built[0]}?" in err, err
    with pytest.raises(SystemExit) as done:
        main(["bench", str(scaffold), "--repeats", "0"])
    assert done.value.code == 2 and "expected a whole number >= 1, got '0'" in capsys.readouterr().err


def test_a_kernels_community_benchmark_runs_unchanged(tmp_path, capsys):
    kernel = tmp_path / "relu"
    shutil.copytree(corpus_kernel("relu"), kernel)
    commit(kernel)
    variant = next(v for v in _variants_here(kernel) if "-cpu-" in v)
    assert main(["build", str(kernel), "--variant", variant]) == 0
    out_json = tmp_path / "relu.json"
    capsys.readouterr()
    assert main(["bench", str(kernel), "--repeats", "3", "--warmup", "1", "--json", str(out_json)]) == 0, \
        capsys.readouterr()
    rows = json.loads(out_json.read_text())["workloads"]
    assert {(r["class"], r["name"]) for r in rows} == {("ReluBenchmark", "base"), ("ReluBenchmark", "large")}
    assert all(r["verified"] is True and r["speedup"] > 0 for r in rows)


def _variants_here(kernel: Path) -> list[str]:
    """`kbuild variants`' rows for this environment: `relu: torch214-cxx11-cpu-x86_64-linux  <- ...`."""
    done = subprocess.run([sys.executable, "-m", "builder.commands.main", "variants", str(kernel)],
                          capture_output=True, text=True, check=True)
    return [line.split(": ", 1)[1].split()[0] for line in done.stdout.splitlines() if "[this environment]" in line]


def test_publish_with_bench_attaches_the_latest_results(scaffold, tmp_path, capsys):
    kernel, hub = tmp_path / "bscale", tmp_path / "hub"
    shutil.copytree(scaffold, kernel, symlinks=True)
    shutil.rmtree(kernel / ".kbuild" / "bench", ignore_errors=True)
    capsys.readouterr()
    assert main(["publish", str(kernel), "--hub", str(hub), "--with-bench"]) == 7
    err = capsys.readouterr().err
    assert "--with-bench: no results in" in err and "run kbuild bench" in err and "Traceback" not in err

    assert main(["bench", str(kernel), "--repeats", "2", "--warmup", "0"]) == 0
    assert not list(kernel.rglob("__pycache__")), "benchmarks/ and the variant stay free of bytecode"
    assert main(["publish", str(kernel), "--hub", str(hub), "--with-bench"]) == 0
    (repo,) = hub.glob("kernels/*/bscale.git")
    listed = subprocess.run(["git", "--git-dir", str(repo), "ls-tree", "-r", "--name-only", "v1"], capture_output=True,
                            text=True, check=True).stdout.split()
    assert {"benchmarks/benchmark.py", "benchmarks/results/results.json", "benchmarks/results/results.svg"} <= set(listed)
    shown = subprocess.run(["git", "--git-dir", str(repo), "show", "v1:benchmarks/results/results.json"],
                           capture_output=True, text=True, check=True).stdout
    assert json.loads(shown)["workloads"][0]["name"] == "scale"
    # published again without them: the branch no longer offers results of older builds
    assert main(["publish", str(kernel), "--hub", str(hub), "--force"]) == 0
    listed = subprocess.run(["git", "--git-dir", str(repo), "ls-tree", "-r", "--name-only", "v1"], capture_output=True,
                            text=True, check=True).stdout.split()
    assert "benchmarks/results/results.json" not in listed and "benchmarks/benchmark.py" in listed


def test_a_published_kernel_is_benchmarked_from_the_hub(scaffold, tmp_path, capsys, monkeypatch):
    kernel, hub = tmp_path / "bscale", tmp_path / "hub"
    shutil.copytree(scaffold, kernel, symlinks=True)
    shutil.rmtree(kernel / ".kbuild" / "bench", ignore_errors=True)  # the scaffold's own results (an earlier test's run)
    assert main(["publish", str(kernel), "--hub", str(hub)]) == 0
    monkeypatch.setenv("KBUILD_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    out_json = tmp_path / "remote.json"
    # a local hub is the user's own: the loader's trust rule lets it load (an HTTP hub's org must be trusted)
    code = main(["bench", "me/bscale@v1", "--hub", str(hub), "--repeats", "2", "--warmup", "0",
                 "--json", str(out_json)])
    output = capsys.readouterr()
    assert code == 0, output
    (row,) = json.loads(out_json.read_text())["workloads"]
    assert (row["kernel"], row["name"], row["verified"]) == ("bscale", "scale", True)
    assert row["variant"] == cpu_variant(scaffold)
    # nothing written into a folder of the user's: not the kernel it was published from, not the working folder
    assert not (kernel / ".kbuild" / "bench").exists() and not (tmp_path / ".kbuild").exists()
    assert main(["bench", "me/bscale@v7", "--hub", str(hub), "--trust-remote-code"]) == 2
    assert "has no version 7" in capsys.readouterr().err


# --- which variants run, and with which devices in view: kbuild test's choice --------------------

SEEN_BENCHMARK = f'''import json
import os
from pathlib import Path

import torch

from kbuild.benchmark import Benchmark


class Seen(Benchmark):
    def setup(self):
        variant = Path(self.kernel.__file__).resolve().parent.name
        saw = {{name: os.environ.get(name) for name in {WATCHED!r}}}
        saw.update(device_count=torch.cuda.device_count(), device=self.device)  # where the runner puts tensors
        (Path(__file__).parents[1] / "records" / f"{{variant}}.json").write_text(json.dumps(saw))
        self.x = torch.ones(8, device=self.device)

    def benchmark_double(self):
        self.out = self.x * 2

    def verify_double(self):
        return self.x + self.x
'''


@pytest.fixture(scope="module")
def seen_built(tmp_path_factory) -> Path:
    return build_seen(tmp_path_factory.mktemp("bench-seen"), {"benchmarks/benchmark.py": SEEN_BENCHMARK})


def kbuild_bench(capsys, kernel: Path, *args: str) -> tuple[int, str, dict]:
    """`kbuild bench` of `kernel` with one timed call: its exit code, output and JSON."""
    capsys.readouterr()
    out_json = kernel / "bench.json"
    code = main(["bench", str(kernel), "--warmup", "0", "--repeats", "1", "--json", str(out_json), *args])
    return code, "".join(capsys.readouterr()), json.loads(out_json.read_text()) if out_json.exists() else {}


def test_a_cpu_variant_is_benchmarked_with_the_gpus_hidden_and_other_backends_are_left_out(seen_built, tmp_path,
                                                                                           monkeypatch, capsys):
    seen_kernel = fresh_copy(seen_built, tmp_path, monkeypatch)
    code, out, doc = kbuild_bench(capsys, seen_kernel)
    assert code == 0, out
    saw = seen(seen_kernel)
    assert set(saw) == {"torch-cpu", "torch-cuda"}, out
    # as kbuild test runs its suite: every GPU hidden, no Triton interpreter
    assert saw["torch-cpu"] == {**HIDDEN, "KBUILD_TEST_DEVICE": None, "TRITON_INTERPRET": None, "device_count": 0,
                                "device": "cpu"}, saw
    assert "benchmarks run in torch " in out and "benchmarking seen/torch-cpu on cpu (no GPU visible to the " \
        "benchmarks)" in out, out
    # the Triton variant keeps the machine's devices (none here: Triton's interpreter on the CPU)
    assert saw["torch-cuda"]["CUDA_VISIBLE_DEVICES"] is None, saw
    if saw["torch-cuda"]["device_count"] == 0:
        assert saw["torch-cuda"]["TRITON_INTERPRET"] == "1" and saw["torch-cuda"]["device"] == "cpu", saw
        assert "benchmarking seen/torch-cuda on cpu (Triton interpreter)" in out, out
    for backend in ("rocm", "xpu", "metal"):
        assert re.search(rf"^left out +seen/torch-{backend}: built for {backend}, this system uses cuda: the loader "
                         rf"would not pick it here \(--variant torch-{backend} benchmarks it anyway\)$", out, re.M), out
    assert {(r["variant"], r["reason"].split(":")[0]) for r in doc["left_out"]} == {
        (f"torch-{b}", f"built for {b}, this system uses cuda") for b in ("rocm", "xpu", "metal")}
    assert {r["variant"] for r in doc["workloads"]} == {"torch-cpu", "torch-cuda"} and not doc["skipped"], doc


def test_variant_benchmarks_one_the_loader_would_not_pick_saying_why(seen_built, tmp_path, monkeypatch, capsys):
    seen_kernel = fresh_copy(seen_built, tmp_path, monkeypatch)
    code, out, doc = kbuild_bench(capsys, seen_kernel, "--variant", "torch-rocm", "--variant", "torch-cpu")
    assert code == 0, out
    assert re.search(r"^benchmarking seen/torch-rocm on cpu \(Triton interpreter\), as --variant asks: the loader "
                     r"would not pick it here \(built for rocm, this system uses cuda\)$", out, re.M), out
    assert "left out" not in out and not doc["left_out"], out
    saw = seen(seen_kernel)
    assert saw["torch-rocm"]["CUDA_VISIBLE_DEVICES"] is None and saw["torch-cpu"]["CUDA_VISIBLE_DEVICES"] == "", saw


def test_when_nothing_built_can_run_here_no_workload_runs(seen_built, tmp_path, monkeypatch, capsys):
    seen_kernel = fresh_copy(seen_built, tmp_path, monkeypatch)
    for name in ("torch-cpu", "torch-cuda"):
        shutil.rmtree(seen_kernel / "build" / name)
    code, out, doc = kbuild_bench(capsys, seen_kernel)
    assert code == 1 and not seen(seen_kernel), out
    assert len(doc["left_out"]) == 3 and not doc["workloads"], doc
    assert "kbuild: error: no workload ran: every variant was skipped or left out" in out, out
    assert "hint: --variant V for one the loader would not pick here" in out, out
