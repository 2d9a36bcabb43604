"""The compile cache's launcher, rules and stats log, read and rendered without compiling."""

from __future__ import annotations

import re
from pathlib import Path

from builder.backends import CompileRule
from builder.backends.nvcc_rule import NVCC, nvcc_source_flags
from builder.compile import compile_cache, ninja_file
from builder.compile.compile_cache import CacheStats, CompileCache
from builder.plan.steps import plan_build
from plan_inputs import COMPILED, inputs, write_kernel

# -- pure ---------------------------------------------------------------------------------------


def test_stats_log_counts_hits_misses_and_the_rest(tmp_path):
    log = tmp_path / "stats.log"
    log.write_text("# ../a.cpp\ncache_miss\ndirect_cache_miss\nlocal_storage_write\n"
                   "# ../b.cpp\ndirect_cache_hit\nlocal_storage_hit\n"
                   "# ../c.cu\ndirect_cache_miss\npreprocessed_cache_hit\n"
                   "# ../d.cpp\ncompile_failed\n")
    assert compile_cache.read_stats(log) == CacheStats(hits=2, misses=1, uncached=1)
    assert compile_cache.read_stats(tmp_path / "missing") == CacheStats()
    assert CacheStats(3, 0).line() == "compile cache: 3 hit(s), 0 miss(es)"


def test_launcher_sets_a_shareable_content_keyed_cache(tmp_path):
    cache = CompileCache("/opt/cc dir/ccache", tmp_path / "compile", tmp_path / "proj", tmp_path / "log")
    text = compile_cache.launcher_script(cache)
    assert text.startswith("#!/bin/sh\n")
    assert f"export CCACHE_DIR={tmp_path / 'compile'}\n" in text
    assert f"export CCACHE_BASEDIR={tmp_path / 'proj'}\n" in text  # paths below it hash relative
    assert "export CCACHE_NOHASHDIR=1\n" in text  # the working directory is not in the key
    assert "export CCACHE_COMPILERCHECK='%compiler% --version'\n" in text  # not the mtime
    assert text.endswith("exec '/opt/cc dir/ccache' \"$@\"\n")
    assert compile_cache.launcher_script(None).endswith('\nexec "$@"\n')  # no cache: same command line


def test_rules_run_compilers_through_the_launcher_with_prefix_maps(tmp_path):
    root = tmp_path / "a b"
    m = write_kernel(root, COMPILED.format(backends='["cpu", "cuda"]', cuda_extra="", torch_extra=""))
    plans = list(plan_build(inputs(m)).variants)  # a .cu unit: the graph has nvcc's rule
    text = re.sub(r" \$\n +", " ", ninja_file.render(plans, "c++", {"/opt/cuda-13.0/bin/nvcc": "/x/nvcc"}, root=root,
                                                     launcher=str(tmp_path / "bin" / "launch er")).text)
    assert f"launcher = '{tmp_path}/bin/launch er'" in text
    assert f"cxx_reproducible = '-ffile-prefix-map={root}/=../'" in text
    assert f"nvcc_reproducible = -Xcompiler '-ffile-prefix-map={root}/=../'" in text
    assert "command = $launcher $cxx -MMD" in text and "command = $launcher $nvcc " in text
    assert "$nvcc_reproducible $header_maps $nvcc_source -c $in" in text
    # torch's headers are mapped per edge, from that edge's own -I flags
    assert ninja_file.torch_header_maps(["-I/env/lib/site-packages/torch/include", "-I/x/include",
                                         "-I/env/lib/site-packages/torch/include/torch/csrc/api/include"]) == [
        ("/env/lib/site-packages/", "")]
    # nvcc hashes the source's absolute path into anonymous-namespace names: pass a relative one
    assert nvcc_source_flags(root / "k" / "a.cu", root) == ["-Xcudafe", "--orig_src_path_name=../k/a.cu"]
    assert nvcc_source_flags(Path("/elsewhere/a.cu"), root) == []
    bare = ninja_file.render([], "c++", None).text
    assert "launcher = \n" in bare and "cxx_reproducible = \n" in bare


def test_a_rule_is_written_from_what_its_backend_says():
    # a compiler that speaks gcc's options: its depfile, the prefix maps as they are, no flags from a unit's path
    gcc_like = CompileRule("xpu", "XPU")
    assert gcc_like.command() == "$launcher $xpu -MMD -MF $out.d $flags $xpu_reproducible $header_maps -c $in -o $out"
    assert gcc_like.host(["-ffile-prefix-map=/a/=../"]) == ["-ffile-prefix-map=/a/=../"]
    # nvcc writes its own depfile, passes each host option through -Xcompiler, and takes flags from a unit's path
    assert NVCC.command() == ("$launcher $nvcc --generate-dependencies-with-compile --dependency-output $out.d "
                              "$flags $nvcc_reproducible $header_maps $nvcc_source -c $in -o $out")
    assert NVCC.host(["-ffile-prefix-map=/a/=../"]) == ["-Xcompiler", "-ffile-prefix-map=/a/=../"]
    assert "rule nvcc" not in ninja_file.render([], "c++").text  # a backend's rule is written once a unit uses it
