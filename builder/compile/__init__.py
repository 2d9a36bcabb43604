"""Running the plan: one ninja graph for every variant, run with progress; compiles through ccache (local and
remote storage) or sccache-dist; one-line reasons for failed compiles.
"""
