"""Where a kernel project keeps what kbuild makes: one name for each folder, used by every command."""

BUILD_DIR = "build"  # the staged variants, published as they are
WORK_DIR = ".kbuild"  # objects, logs, the ninja graph, generated headers: never published
BENCH_DIR = ".kbuild/bench"  # `kbuild bench`'s latest results of the kernel: results.json, results.svg
PUBLISHED_BENCH_DIR = "benchmarks/results"  # where `kbuild publish --with-bench` puts them on the branch
LAYER_CHECK = "layer-check.json"  # `kbuild check-layers`' latest result of a variant, in .kbuild/<variant>/
