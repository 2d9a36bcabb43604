"""The hub in front of an upstream hub (`kbuild hub serve --upstream URL`, `kbuild hub mirror`):
docs/upstream.md.

- client.py: every byte to and from the upstream, through huggingface_hub's HTTP client.
- cache.py: what was fetched, on disk, keyed by repo and the upstream's commit ids; refs last seen;
  one download per file however many clients ask.
- verify.py: a kernel variant's files against its metadata.json digest (and signature rule) before
  any of them is kept.
- policy.py: which names may come from the upstream at all (no dependency confusion).
"""
