"""Where a kernel project keeps what kbuild makes: one name for each folder, used by every command."""

BUILD_DIR = "build"  # the staged variants, published as they are
WORK_DIR = ".kbuild"  # objects, logs, the ninja graph, generated headers: never published
