"""The hub service: `kbuild hub serve`, a server that speaks the subset of the Hugging Face Hub
API that huggingface_hub, Hugging Face's `kernels` and kbuild's loader use (server/), the kernel
pages it renders (pages/), and the git store under it (gitstore.py: a bare git repository per
repo, a commit per publish; refs_reader.py, blobfiles.py, paths.py; its errors in errors.py). What
the server and the pages both stand on is here too: route.py (what an endpoint declares), tokens.py
(token files) and serve_options.py (what `kbuild hub serve` runs with).

Its own package, not a stage of the build: builder/ publishes to it as a client (builder/hub/:
a local store through gitstore.py, a served one over HTTP through huggingface_hub), and the
runtime reads it through kbuild/hubs/. It shares builder's ground floor (errors, proc, notices)
and imports no stage of builder/; nothing in builder/ imports its server but `kbuild hub serve`.
"""
