"""Signed variants: who signed a variant and whether the require-signature rule lets it load
(check.py), kbuild's SSH signatures (ssh.py, OpenSSH's `ssh-keygen -Y`), Hugging Face's sigstore
bundles (sigstore_bundle.py, sigstore-python, offline) and the settings that say whom each
organisation trusts and which must be signed (rules.py). docs/formats.md, "Signatures"."""
