"""kbuild/hubs/identity.py: what tells kbuild's hub from the Hugging Face Hub, and what differs."""

from kbuild.hubs.identity import KBUILD_HUB_HEADER, is_kbuild_hub, page_url, token_hint


def test_only_the_header_kbuild_hub_serve_sends_makes_a_kbuild_hub():
    assert is_kbuild_hub({KBUILD_HUB_HEADER: "kbuild hub serve"})
    assert not is_kbuild_hub({}) and not is_kbuild_hub(None) and not is_kbuild_hub({KBUILD_HUB_HEADER: "other"})


def test_each_hub_gets_the_page_it_has():
    # kbuild's hub: the kernel's page (tests/integration/test_publish.py opens it); the Hugging Face
    # Hub: a kernel repo's files at a revision, as its model and dataset repos have theirs
    assert page_url("http://127.0.0.1:8000", "me/cpu-scale", "abc", kbuild_hub=True) == "http://127.0.0.1:8000/me/cpu-scale"
    assert page_url("https://huggingface.co", "me/cpu-scale", "abc", kbuild_hub=False) == \
        "https://huggingface.co/kernels/me/cpu-scale/tree/abc"


def test_hf_auth_login_is_said_only_for_the_hugging_face_hub():
    assert "hf auth login" not in token_hint(True) and "ROOT/.token" in token_hint(True) and "--token-file" in token_hint(True)
    assert "hf auth login" in token_hint(False) and "write to" in token_hint(False) and "read" in token_hint(False, write=False)
