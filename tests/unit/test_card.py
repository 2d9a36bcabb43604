"""The repo card's usage line pins the version in words both loaders read: Hugging Face's
`kernels.get_kernel` takes `version=1` (or `revision=`), not `org/name@v1`."""

from __future__ import annotations

from builder.project.manifest import load_manifest
from builder.publish.card import render_card
from tiny_kernel import write_kernel


def test_the_usage_line_pins_by_version_for_a_version_branch_and_by_revision_otherwise(tmp_path):
    write_kernel(tmp_path)
    manifest = load_manifest(tmp_path)
    card = render_card(manifest, "org/tiny", "v3", [])
    assert 'tiny = get_kernel("org/tiny", version=3)' in card and "@v3" not in card.split("## Usage")[1].split("##")[0]
    card = render_card(manifest, "org/tiny", "nightly", [])
    assert "tiny = get_kernel(\"org/tiny\", revision='nightly')" in card
