"""Integration: `kbuild check-layers` against transformers 5.25's own layers (tests/helpers/hf_envs.py's
kernels-0.19 environment, torch 2.13.0 CPU), real builds, real ops:

- tests/fixtures/layer-check: one CPU op that rotates halves in place with no gradient formula. Behind a
  clone (as kernels-community rotary's apply_rotary_transformers wraps its CUDA op) the forward is right and
  the gradient wrong: exit 1 naming the layer and the gradient, the op named as one autograd cannot see;
  behind an autograd.Function: exit 0; with has_backward = False: checked for inference only; a class layer
  whose weight leaves autograd: its weight's gradient named.
- kbuild's own kernels/rmsnorm CPU variant against LlamaRMSNorm: exit 0, the weight's gradient compared.
- bad input: a map naming a layer the kernel lacks, a map that is no map, a kernel transformers maps nothing
  to: exit 2, one line each.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import hf_envs

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "layer-check"
IGNORE = shutil.ignore_patterns("build", ".kbuild", "__pycache__")
KBUILD = [sys.executable, "-m", "builder.commands.main"]


@pytest.fixture(scope="module")
def hf_python() -> Path:
    try:
        return hf_envs.ensure("kernels-0.19")
    except hf_envs.EnvError as e:
        pytest.fail(str(e))


def built(src: Path, dest: Path, python: Path) -> Path:
    """A committed copy of `src`, built for the torch of `python`."""
    shutil.copytree(src, dest, ignore=IGNORE)
    git = ["git", "-C", str(dest), "-c", "user.name=kbuild-tests", "-c", "user.email=tests@kbuild.invalid",
           "-c", "commit.gpgsign=false"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "copy"]):
        subprocess.run([*git, *args], check=True, capture_output=True, timeout=120)
    done = subprocess.run([*KBUILD, "build", str(dest), "--python", str(python), "-j", "2"], capture_output=True,
                          text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return dest


@pytest.fixture(scope="module")
def fixture_kernel(hf_python, tmp_path_factory) -> Path:
    return built(FIXTURE, tmp_path_factory.mktemp("lc") / "layer-check", hf_python)


@pytest.fixture(scope="module")
def rmsnorm(hf_python, tmp_path_factory) -> Path:
    return built(REPO / "kernels" / "rmsnorm", tmp_path_factory.mktemp("rms") / "rmsnorm", hf_python)


def check(kernel: Path, python: Path, tmp_path: Path, *args: str) -> tuple[int, str, list[dict]]:
    out = tmp_path / "check.json"
    done = subprocess.run([*KBUILD, "check-layers", str(kernel), "--python", str(python), "--json", str(out), *args],
                          capture_output=True, text=True, timeout=900)
    assert "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    report = json.loads(out.read_text()) if out.is_file() else []
    return done.returncode, done.stdout + done.stderr, report


def rows(report: list[dict], layer: str, mode: str, part: str) -> dict[str, dict]:
    (variant,) = [v for v in report if v.get("rows")]
    return {r["quantity"]: r for r in variant["rows"]
            if r["layer"] == layer and r["mode"] == mode and r["part"] == part}


def test_an_op_autograd_cannot_see_behind_a_clone_is_named(fixture_kernel, hf_python, tmp_path):
    code, out, report = check(fixture_kernel, hf_python, tmp_path, "--map", "rotary_pos_emb=RotaryInPlace")
    assert code == 1, out
    forward = rows(report, "rotary_pos_emb", "training", "forward")
    assert forward and all(r["ok"] and r["rel"] < 1e-6 for r in forward.values()), forward
    backward = rows(report, "rotary_pos_emb", "training", "backward")
    assert set(backward) == {"grad of q", "grad of k"}, backward  # cos and sin need no gradient in the model
    assert all(not r["ok"] and r["rel"] > 0.3 for r in backward.values()), backward
    assert "rotary_pos_emb (RotaryInPlace), float32, training: backward: grad of q differs, rel" in out
    assert "the whole model, float32, training: grad of model.layers." in out  # q_proj's and k_proj's
    # why: the op, named, writes its inputs with no formula autograd could use
    assert "rotate_.default: autograd: NO autograd formula; it writes x1, x2 in place and returns nothing" in out
    (diagnosis,) = [d for v in report for d in v.get("diagnosis", {}).values()]
    (op,) = diagnosis["opcheck"]
    assert op.endswith("rotate_.default") and set(diagnosis["opcheck"][op]) == {
        "test_schema", "test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic"}


def test_the_same_op_behind_an_autograd_function_agrees(fixture_kernel, hf_python, tmp_path):
    code, out, report = check(fixture_kernel, hf_python, tmp_path, "--map", "rotary_pos_emb=RotaryFunction")
    assert code == 0, out
    backward = rows(report, "rotary_pos_emb", "training", "backward")
    assert set(backward) == {"grad of q", "grad of k"} and all(r["ok"] for r in backward.values())
    model = rows(report, "model", "training", "backward")
    assert len(model) == 1 and next(iter(model)).startswith("grads of all 21 parameters"), model


def test_a_weight_that_leaves_autograd_is_named(fixture_kernel, hf_python, tmp_path):
    code, out, report = check(fixture_kernel, hf_python, tmp_path, "--map", "RMSNorm=RMSNormWeightDetached",
                              "--mode", "training")
    assert code == 1, out
    backward = rows(report, "RMSNorm", "training", "backward")
    assert backward["grad of hidden_states"]["ok"] and not backward["grad of weight"]["ok"]
    assert "RMSNorm (RMSNormWeightDetached), float32, training: backward: grad of weight differs, rel missing" in out
    assert not rows(report, "RMSNorm", "inference", "forward")  # --mode training


def test_a_layer_without_backward_is_checked_for_inference_only(fixture_kernel, hf_python, tmp_path):
    code, out, report = check(fixture_kernel, hf_python, tmp_path, "--map", "rotary_pos_emb=RotaryNoBackward")
    assert code == 0, out
    assert "rotary_pos_emb (RotaryNoBackward): checked for inference only: its has_backward is False" in out
    assert rows(report, "rotary_pos_emb", "inference", "forward")
    assert not rows(report, "rotary_pos_emb", "training", "forward")


def test_a_layer_that_raises_is_a_failure_naming_the_error(fixture_kernel, hf_python, tmp_path):
    code, out, report = check(fixture_kernel, hf_python, tmp_path, "--map", "rotary_pos_emb=RotaryUnsupported")
    assert code == 1, out
    assert ("the whole model, float32, inference: the kernelized model raised RuntimeError: rotate_: x1 and x2 must "
            "have one shape") in out, out
    (first,) = rows(report, "model", "inference", "forward").values()
    assert first["why"] == "raised" and first["rel"] is None and not first["ok"]
    assert "rel raised" not in out and " differ\n" not in out


def test_transformers_own_mapping_is_the_default(fixture_kernel, hf_python, tmp_path):
    """The fixture's repo id is kernels-community/rotary: transformers 5.25 maps rotary_pos_emb to its
    apply_rotary_transformers for training and inference (on CUDA; the layers are the same on CPU)."""
    code, out, report = check(fixture_kernel, hf_python, tmp_path)
    assert code == 1, out
    assert "rotary_pos_emb <- layers.apply_rotary_transformers (function layer, transformers 5.25.0 (cuda, xpu: " \
           "training, torch_compile, inference" in out
    assert "rotary_pos_emb (apply_rotary_transformers), float32, training: backward: grad of q differs" in out


def test_kbuild_rmsnorm_matches_llama_rmsnorm(rmsnorm, hf_python, tmp_path):
    code, out, report = check(rmsnorm, hf_python, tmp_path, "--map", "RMSNorm=RMSNorm")
    assert code == 0, out
    backward = rows(report, "RMSNorm", "training", "backward")
    assert set(backward) == {"grad of hidden_states", "grad of weight"}, backward
    assert all(r["ok"] for r in backward.values())
    (variant,) = [v for v in report if v.get("rows")]
    assert variant["layers"][0]["replaces"] == ["LlamaRMSNorm"]
    assert "custom ops it calls" not in out and "opcheck" in out  # its ops, each with opcheck's four tests


@pytest.mark.parametrize("args, says", [
    (["--map", "RMSNorm=Nope"], "check-layers: RMSNorm=Nope: the kernel has no layer 'Nope' (its layers: "),
    (["--map", "rotary_pos_emb"], "--map 'rotary_pos_emb': expected LAYER=KERNEL_LAYER"),
    (["--map", "rotary_pos_emb=RotaryInPlace", "--map", "rotary_pos_emb=RotaryFunction"], "is mapped twice"),
    (["--map", "RMSNorm=RotaryInPlace"], "takes other arguments than the RMSNorm it would replace"),
    (["--map", "NoSuchLayer=RotaryInPlace"], "no module or function of a tiny llama model"),
    (["--map", "RMSNorm=RMSNormWeightDetached", "--model", "no-such-arch"], "--model no-such-arch: transformers has"),
])
def test_bad_input_is_one_line_and_exit_2(fixture_kernel, hf_python, tmp_path, args, says):
    code, out, _ = check(fixture_kernel, hf_python, tmp_path, *args)
    assert code == 2, out
    errors = [line for line in out.splitlines() if line.startswith("kbuild: error:")]
    assert len(errors) == 1 and says in errors[0], out


def test_a_kernel_transformers_maps_nothing_to_needs_a_map(rmsnorm, hf_python, tmp_path):
    code, out, _ = check(rmsnorm, hf_python, tmp_path)
    assert code == 2, out
    assert "check-layers: transformers 5.25.0 (" in out and "maps no layer to kbuild/rmsnorm" in out
    assert "hint: pass --map LAYER=KERNEL_LAYER" in out


@pytest.fixture(scope="module")
def pytest_overlay(tmp_path_factory) -> Path:
    """pytest for the kernels-0.19 environment (which has none), lent from this one on PYTHONPATH."""
    import _pytest
    import iniconfig
    import pluggy
    import py

    overlay = tmp_path_factory.mktemp("pytest-overlay")
    for module in (pytest, _pytest, pluggy, iniconfig, py):
        where = Path(module.__file__)
        (overlay / (where.parent.name if where.name == "__init__.py" else where.name)).symlink_to(
            where.parent if where.name == "__init__.py" else where)
    return overlay


def kbuild_test(kernel: Path, python: Path, overlay: Path | None = None) -> tuple[int, str]:
    env = {**os.environ, **({"PYTHONPATH": str(overlay)} if overlay else {})}
    done = subprocess.run([*KBUILD, "test", str(kernel), "--python", str(python)], capture_output=True, text=True,
                          timeout=900, env=env)
    assert "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    return done.returncode, done.stdout + done.stderr


def test_kbuild_test_checks_the_layers_transformers_maps_after_the_suite(fixture_kernel, hf_python, pytest_overlay):
    """The suite (forward only) passes; transformers maps rotary_pos_emb to the kernel's repo id, so kbuild test
    checks the layer after it, and the wrong gradient fails the variant."""
    code, out = kbuild_test(fixture_kernel, hf_python, pytest_overlay)
    assert code == 1, out
    assert "3 passed" in out, out
    assert "layers: rotary_pos_emb (apply_rotary_transformers), float32, training: backward: grad of q differs" in out
    assert "layers (rotary_pos_emb <- apply_rotary_transformers) against transformers 5.25.0: forward ok, " \
           "backward DIFFERS" in out
    record = json.loads((fixture_kernel / ".kbuild" / "torch213-cxx11-cpu-x86_64-linux" / "layer-check.json")
                        .read_text())
    assert record["verdict"] == {"forward": True, "backward": False}


def test_kbuild_test_checks_the_map_build_toml_names(fixture_kernel, hf_python, pytest_overlay, tmp_path):
    kernel = tmp_path / "layer-check"
    shutil.copytree(fixture_kernel, kernel)  # built as it is: only the map changes
    toml = kernel / "build.toml"
    toml.write_text(toml.read_text() + '\n[general.check-layers]\nmap = ["rotary_pos_emb=RotaryFunction"]\n')
    code, out = kbuild_test(kernel, hf_python, pytest_overlay)
    assert code == 0, out
    assert "layers (rotary_pos_emb <- RotaryFunction) against transformers 5.25.0: forward ok, backward ok" in out
    code, out, report = check(kernel, hf_python, tmp_path)  # check-layers takes it too
    assert code == 0 and "(function layer, build.toml [general.check-layers];" in out, out
    toml.write_text(toml.read_text().replace("RotaryFunction", "Nope"))
    code, out = kbuild_test(kernel, hf_python, pytest_overlay)
    assert code == 1 and "layer check: check-layers: rotary_pos_emb=Nope: the kernel has no layer 'Nope'" in out, out


def test_kbuild_test_without_transformers_checks_no_layers(fixture_kernel, tmp_path):
    """.venv's Python has no transformers: nothing maps, the suite's result stands (a torch 2.14 Python cannot
    load this torch 2.13 build, so the variant is left out, and no layer check is tried)."""
    code, out = kbuild_test(fixture_kernel, Path(sys.executable))
    assert "layers" not in out.replace("left out", ""), out


def test_a_published_kernel_is_checked_as_get_kernel_loads_it(fixture_kernel, hf_python, tmp_path):
    """ORG/NAME@REV: the variant kbuild's loader picks for the torch of --python, fetched from the hub and
    verified, then checked there."""
    hub = tmp_path / "hub"
    done = subprocess.run([*KBUILD, "publish", str(fixture_kernel), "--hub", str(hub)], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    out_json = tmp_path / "published.json"
    done = subprocess.run([*KBUILD, "check-layers", "kernels-community/rotary@v1", "--hub", str(hub), "--python",
                           str(hf_python), "--trust-remote-code", "--json", str(out_json)],
                          capture_output=True, text=True, timeout=900)
    out = done.stdout + done.stderr
    assert done.returncode == 1 and "Traceback" not in out, out
    assert "rotary_pos_emb (apply_rotary_transformers), float32, training: backward: grad of q differs" in out
    (report,) = json.loads(out_json.read_text())
    assert report["variant"] == "torch213-cxx11-cpu-x86_64-linux" and report["torch"].startswith("2.13.0")
    done = subprocess.run([*KBUILD, "check-layers", "kernels-community/rotary@v9", "--hub", str(hub), "--python",
                           str(hf_python), "--trust-remote-code"], capture_output=True, text=True, timeout=600)
    errors = [line for line in (done.stdout + done.stderr).splitlines() if line.startswith("kbuild: error:")]
    assert done.returncode == 2 and len(errors) == 1 and "has no version 9" in errors[0], done.stdout + done.stderr
