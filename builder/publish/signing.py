"""`kbuild publish --sign`: an SSH signature over each published variant's metadata.json
(`metadata.json.sig`, docs/formats.md, "Signatures"), made by `ssh-keygen -Y sign` with the key the
settings name (BuilderSettings.signing_key_setting), uploaded as `signatures/<variant>/metadata.json.sig`
(kbuild/repo_layout.py). The build folder is not touched: the signature is made in a scratch folder
for the upload only.
"""

from __future__ import annotations

from pathlib import Path

from builder.config.cascade import Setting
from kbuild.signatures.ssh import NAMESPACE, SIGNATURE
from kbuild_common import proc
from kbuild_common.errors import CommandError, KbuildError


def sign_metadata(metadata: Path, key: Setting[Path], scratch: Path, variant: str) -> Path:
    """`metadata.json.sig` for `metadata` (written under `scratch`), made with `key`."""
    try:
        signature = proc.run_bytes(["ssh-keygen", "-Y", "sign", "-n", NAMESPACE, "-f", str(key.value)],
                                   input=metadata.read_bytes(), timeout=120, what="ssh-keygen -Y sign")
    except CommandError as e:
        last = (e.output_tail.strip().splitlines() or [str(e)])[-1]
        raise KbuildError(f"{variant}: signing metadata.json with {key.value} ({key.origin}) failed: {last}",
                          hint="the key must be an SSH private key without a passphrase, or one ssh-agent holds") \
            from None
    folder = scratch / variant
    folder.mkdir(parents=True, exist_ok=True)
    (folder / SIGNATURE).write_bytes(signature)
    return folder / SIGNATURE
