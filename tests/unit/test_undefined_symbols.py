"""A library with undefined symbols, explained: which section of build.toml defines each and which
archs bring it back (stage/undefined_symbols.py). Pure: the symbols are C names (nothing to
demangle) and the objects are never built, so no process runs."""

from __future__ import annotations

import pytest
from test_arch_selection import restricted, two_archs

from builder.stage.link_check import LinkCheck
from builder.stage.undefined_symbols import Symbol, explain
from plan_inputs import CU130_214, by_name, linux_x86_64  # noqa: F401 (fixture)

# sage-attention's shape: the binding calls a Blackwell-only section's entry point with no #if around it
ENTRY = 'extern "C" void blackwell_scale(float* x) { }\n'


def variant(tmp_path, archs: str, source: str = "--cuda-archs", blackwell='"10.0a"'):
    m = two_archs(tmp_path, blackwell=blackwell)
    (m.root / "blackwell" / "blackwell.cu").write_text(ENTRY)
    return m, by_name(restricted(m, archs, source))[CU130_214]


def test_a_left_out_section_is_named_with_the_archs_to_pass(tmp_path, linux_x86_64):
    m, v = variant(tmp_path, "9.0a")
    got = explain(v, m, LinkCheck(("blackwell_scale",), ()), "--cuda-archs", ("9.0a",))
    assert got.reason == (f"{v.library.name} cannot load: undefined symbol blackwell_scale; defined in "
                          '[kernel.blackwell] (10.0a), which --cuda-archs 9.0a left out: build with --cuda-archs '
                          '"9.0a;10.0a" to compile it too, or without --cuda-archs')
    assert got.details == ()  # one symbol: the reason says it all


def test_torch_cuda_arch_list_is_named_as_what_to_set(tmp_path, linux_x86_64):
    m, v = variant(tmp_path, "9.0", "TORCH_CUDA_ARCH_LIST")
    got = explain(v, m, LinkCheck(("blackwell_scale", "other_missing"), ("libcuda.so.1",)),
                  "TORCH_CUDA_ARCH_LIST", ("9.0",))
    assert 'which TORCH_CUDA_ARCH_LIST 9.0 left out: build with TORCH_CUDA_ARCH_LIST="9.0;10.0a"' in got.reason
    assert "(and 1 more)" in got.reason
    assert got.details == ("blackwell_scale: called from an object of the link; defined in [kernel.blackwell]",
                           "other_missing: called from an object of the link",
                           "not found here, so not searched: libcuda.so.1")


def test_a_symbol_nothing_defines_says_so(tmp_path, linux_x86_64):
    m, v = variant(tmp_path, "9.0a")
    got = explain(v, m, LinkCheck(("nobody_defines_me",), ()), "--cuda-archs", ("9.0a",))
    assert got.reason.endswith("undefined symbol nobody_defines_me; no section of build.toml defines it (a source "
                               "missing from a [kernel.*] src list, or a library the kernel must link?)")


def test_a_declaration_in_a_shared_header_is_not_a_definition(tmp_path, linux_x86_64):
    m, v = variant(tmp_path, "9.0a")
    (m.root / "blackwell" / "blackwell.cu").write_text("// calls nothing\n")
    (m.root / "blackwell" / "api.h").write_text("void blackwell_scale(float* x);\n")  # not a compiled source
    got = explain(v, m, LinkCheck(("blackwell_scale",), ()), "--cuda-archs", ("9.0a",))
    assert "no section of build.toml defines it" in got.reason


@pytest.mark.parametrize(("readable", "name"), [
    ("qk_int8_sv_f8_accum_f32_attn_inst_buf(at::Tensor, at::Tensor, int)", "qk_int8_sv_f8_accum_f32_attn_inst_buf"),
    ("flash::mha_fwd(at::Tensor&, std::optional<at::Tensor> const&)", "mha_fwd"),
    ("void run_mha<cutlass::half_t, 128>(Flash_fwd_params&)", "run_mha"),
    ("mha_fwd", "mha_fwd"),
])
def test_the_bare_name_of_a_demangled_symbol(readable, name):
    assert Symbol("_Zx", readable, (), ()).name == name
