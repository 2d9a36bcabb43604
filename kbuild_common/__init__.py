"""The ground floor the builder (`builder/`, the `kbuild` command) and the hub service
(`kbuild_hub/`) share: errors and the exit code each maps to (errors.py), running processes
(proc.py), and notices, the warnings and trace lines a long job reports (notices.py). It imports
nothing of either; the runtime (`kbuild/`) does not use it (docs/ARCHITECTURE.md)."""
