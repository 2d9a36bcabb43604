"""Running the plan: one ninja graph for every variant, run with progress; compiles through ccache (local and
remote storage) or sccache-dist; one-line reasons for failed compiles.
"""

from builder.exports import lazy_exports

__all__, __getattr__ = lazy_exports(__name__, graph=("nvcc_threads", "run_graph", "usable_cores", "write_graph"),
                                    ninja_run=("ninja_binary",))
