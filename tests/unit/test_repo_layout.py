"""Where a variant's files are in a hub repo (kbuild/repo_layout.py): its folder under build/, its
SSH signature under signatures/ (outside the folder Hugging Face's kernels 0.18+ check against the
digest), and the in-folder signature older kbuild publishes hold, read when the new place has none."""

from __future__ import annotations

from builder.hub.backend import RemoteFile
from builder.publish.publish import LocalVariant, plan_publish
from kbuild.repo_layout import layer_check, repo_path, variant_of, variant_paths

V = "torch-cpu"
FILES = ["build/torch-cpu/__init__.py", "build/torch-cpu/metadata.json", "build/torch-cuda/metadata.json"]


def test_the_signature_is_published_outside_the_variant_folder():
    assert repo_path(V, "metadata.json.sig") == "signatures/torch-cpu/metadata.json.sig"
    assert repo_path(V, "metadata.json.sigstore") == "build/torch-cpu/metadata.json.sigstore"  # Hugging Face's stays
    assert repo_path(V, "layers/metadata.json.sig") == "build/torch-cpu/layers/metadata.json.sig"
    assert variant_of("signatures/torch-cpu/metadata.json.sig") == V == variant_of("build/torch-cpu/a/b.py")
    assert variant_of("signatures/torch-cpu/other") is None and variant_of("benchmarks/x.py") is None


def test_a_fetch_puts_the_signature_back_beside_metadata_json_and_the_new_place_wins():
    signatures = ["signatures/torch-cpu/metadata.json.sig", "signatures/torch-cuda/metadata.json.sig"]
    new = variant_paths(V, [*FILES, *signatures])
    assert new == {"build/torch-cpu/__init__.py": "__init__.py", "build/torch-cpu/metadata.json": "metadata.json",
                   "signatures/torch-cpu/metadata.json.sig": "metadata.json.sig"}
    old = variant_paths(V, [*FILES, "build/torch-cpu/metadata.json.sig"])  # published before the move
    assert old["build/torch-cpu/metadata.json.sig"] == "metadata.json.sig"
    both = variant_paths(V, [*FILES, "build/torch-cpu/metadata.json.sig", "signatures/torch-cpu/metadata.json.sig"])
    assert [p for p, rel in both.items() if rel == "metadata.json.sig"] == ["signatures/torch-cpu/metadata.json.sig"]


def test_a_publish_owns_the_signature_folder_of_its_variants(tmp_path):
    """Republished unsigned, a variant loses its stale signature, and one an older kbuild left in
    build/<variant>/ goes too; the signatures of variants not published stay."""
    meta = tmp_path / "metadata.json"
    meta.write_text("{}")
    variant = LocalVariant(V, tmp_path, {}, {"metadata.json": meta})
    remote = {p: RemoteFile(p, "0" * 40, 1) for p in (
        "build/torch-cpu/metadata.json", "build/torch-cpu/metadata.json.sig", "signatures/torch-cpu/metadata.json.sig",
        "build/torch-cuda/metadata.json", "signatures/torch-cuda/metadata.json.sig")}
    plan = plan_publish("org/k", "v1", "abc", [variant], {}, remote)
    assert plan.deleted == ("build/torch-cpu/metadata.json.sig", "signatures/torch-cpu/metadata.json.sig")
    signed = LocalVariant(V, tmp_path, {}, {"metadata.json": meta, "metadata.json.sig": meta})
    plan = plan_publish("org/k", "v1", "abc", [signed], {}, remote)
    assert plan.deleted == ("build/torch-cpu/metadata.json.sig",)
    assert plan.replaced == ("build/torch-cpu/metadata.json", "signatures/torch-cpu/metadata.json.sig")


def test_a_publish_owns_the_layer_check_of_its_variants_and_only_theirs(tmp_path):
    """A republish without a record drops the variant's old one (of an older build); another
    variant's record stays, even one whose name starts with this variant's."""
    meta = tmp_path / "metadata.json"
    meta.write_text("{}")
    assert layer_check(V) == "layer-checks/torch-cpu.json"
    remote = {p: RemoteFile(p, "0" * 40, 1) for p in (
        "build/torch-cpu/metadata.json", "layer-checks/torch-cpu.json", "layer-checks/torch-cpu-x.json",
        "layer-checks/torch-cpu.json.old", "layer-checks/torch-cuda.json")}
    plan = plan_publish("org/k", "v1", "abc", [LocalVariant(V, tmp_path, {}, {"metadata.json": meta})], {}, remote)
    assert plan.deleted == ("layer-checks/torch-cpu.json",) and plan.layer_checks == ()
    checked = LocalVariant(V, tmp_path, {}, {"metadata.json": meta}, layer_check=meta)
    plan = plan_publish("org/k", "v1", "abc", [checked], {}, remote)
    assert plan.deleted == () and plan.replaced == ("build/torch-cpu/metadata.json", "layer-checks/torch-cpu.json")
    assert plan.summary()["layer_checks"] == [V]
