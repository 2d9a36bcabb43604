"""Running the plan: one ninja graph for every variant, run with progress; compiles through ccache (local and
remote storage) or sccache-dist; one-line reasons for failed compiles.
"""

from typing import TYPE_CHECKING

from builder.exports import lazy_exports

if TYPE_CHECKING:  # mypy cannot see through __getattr__: the same names, which run time imports on first use
    from builder.compile.graph import nvcc_threads as nvcc_threads
    from builder.compile.graph import run_graph as run_graph
    from builder.compile.graph import usable_cores as usable_cores
    from builder.compile.graph import write_graph as write_graph
    from builder.compile.ninja_run import ninja_binary as ninja_binary

__all__, __getattr__ = lazy_exports(__name__, graph=("nvcc_threads", "run_graph", "usable_cores", "write_graph"),
                                    ninja_run=("ninja_binary",))
