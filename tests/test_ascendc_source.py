"""torch_npu/utils/_ascendc_source.py: the <<<>>> launch rewrite and Ascend C detection.

The module is loaded by file path: it must work without torch (and without importing
the torch_npu package).
"""

import importlib.util
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _load():
    spec = importlib.util.spec_from_file_location(
        "_ascendc_source_under_test", ROOT / "torch_npu" / "utils" / "_ascendc_source.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


src = _load()
L = "::vnpu::ascendc::LaunchKernel<::vnpu::ascendc::KernelKind::"


def test_module_does_not_import_torch():
    text = (ROOT / "torch_npu" / "utils" / "_ascendc_source.py").read_text()
    assert "import torch" not in text


def test_simple_launch():
    out = src.rewrite_launches("add_custom<<<8, nullptr, stream>>>(x, y, z);")
    assert out == L + 'kAuto>(add_custom, "add_custom", 8, nullptr, stream, x, y, z);'


def test_missing_l2ctrl_and_stream_become_nullptr():
    assert src.rewrite_launches("k<<<n>>>(a);") == L + 'kAuto>(k, "k", n, nullptr, nullptr, a);'
    assert src.rewrite_launches("k<<<n, l2>>>(a);") == L + 'kAuto>(k, "k", n, l2, nullptr, a);'


def test_launch_without_arguments():
    assert src.rewrite_launches("k<<<1, 0, s>>>();") == L + 'kAuto>(k, "k", 1, 0, s);'


def test_templated_and_qualified_names():
    out = src.rewrite_launches("ns::mm<M, K, (N > 2), Tile<4, 8>><<<dim, nullptr, s>>>(a, b);")
    assert out == (L + 'kAuto>(ns::mm<M, K, (N > 2), Tile<4, 8>>, "ns::mm<M, K, (N > 2), Tile<4, 8>>", '
                   "dim, nullptr, s, a, b);")
    out = src.rewrite_launches("return ::k<<<1, 0, 0>>>(a);")
    assert out == "return " + L + 'kAuto>(::k, "::k", 1, 0, 0, a);'


def test_nested_parentheses_and_commas_in_arguments():
    text = "k<<<std::min(a, b), ctrl[0], pick(s, 1)>>>(f(x, g(y, z)), v[i, j], [](int p, int q) { return p, q; }, 3);"
    out = src.rewrite_launches(text)
    assert out == (L + 'kAuto>(k, "k", std::min(a, b), ctrl[0], pick(s, 1), f(x, g(y, z)), v[i, j], '
                   "[](int p, int q) { return p, q; }, 3);")


def test_several_launches_and_surrounding_code():
    text = ("int run() {\n"
            "  a<<<1, nullptr, s>>>(x); b<T><<<2, nullptr, s>>>(y);\n"
            "  return c<<<3, nullptr, s>>>(z) + 1;\n"
            "}\n")
    out = src.rewrite_launches(text)
    lines = out.splitlines()
    assert lines[0] == "int run() {" and lines[3] == "}"
    assert lines[1] == ("  " + L + 'kAuto>(a, "a", 1, nullptr, s, x); ' + L + 'kAuto>(b<T>, "b<T>", 2, nullptr, s, y);')
    assert lines[2] == "  return " + L + 'kAuto>(c, "c", 3, nullptr, s, z) + 1;'


def test_comments_strings_and_literals_are_left_alone():
    text = ('// k<<<1, 0, 0>>>(a);\n'
            '/* k<<<1, 0, 0>>>(a); */\n'
            'const char* s = "k<<<1, 0, 0>>>(a)";\n'
            'const char* r = R"x(k<<<1>>>() ")x";\n'
            "char c = '<'; int n = 1'000'000;\n"
            'k<<<1, nullptr, nullptr>>>(a /* , b */, "<<<");\n')
    out = src.rewrite_launches(text)
    in_lines, out_lines = text.splitlines(), out.splitlines()
    assert out_lines[:5] == in_lines[:5]
    assert out_lines[5] == L + 'kAuto>(k, "k", 1, nullptr, nullptr, a /* , b */, "<<<");'


def test_line_numbers_are_kept_for_multiline_launches():
    text = ("x();\n"
            "kernel<A,\n"
            "       B>\n"
            "<<<blockDim,   // cores\n"
            "   nullptr, stream>>>\n"
            "(a,\n"
            " b);\n"
            "y();\n")
    out = src.rewrite_launches(text)
    assert out.count("\n") == text.count("\n")
    # Every piece stays on its line, so g++ reports errors where the source has them.
    assert out.splitlines() == [
        "x();",
        L + "kAuto>(kernel<A,",
        '       B>, "kernel<A, B>", ',
        "blockDim,   // cores",
        "   nullptr, stream",
        ", a,",
        " b);",
        "y();",
    ]


def test_real_kernel_files_keep_their_line_count():
    for path in (ROOT / "tests" / "ascendc" / "kernels").glob("*.asc"):
        text = path.read_text()
        out = src.rewrite_launches(text)
        assert out.count("\n") == text.count("\n"), path.name
        assert "<<<" not in src._mask_non_code(out), path.name
        # Lines without a launch are unchanged.
        for before, after in zip(text.splitlines(), out.splitlines()):
            if "<<<" not in before:
                assert before == after


def test_rewriting_twice_changes_nothing_more():
    once = src.rewrite_launches("k<<<1, nullptr, s>>>(a);")
    assert src.rewrite_launches(once) == once


@pytest.mark.parametrize("definition, kind", [
    ("extern \"C\" __global__ __cube__ void k(GM_ADDR a) {}", "kCube"),
    ("__global__ __vector__ void k(GM_ADDR a) {}", "kVector"),
    ("__global__ __aicore__ void k(GM_ADDR a) { KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIC_ONLY); }", "kCube"),
    ("__global__ __aicore__ void k(GM_ADDR a) { KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIV_ONLY); }", "kVector"),
    ("__global__ __aicore__ void k(GM_ADDR a) { KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2); }", "kMix"),
    ("__global__ __aicore__ void k(GM_ADDR a) { TPipe p; REGIST_MATMUL_OBJ(&p, w, mm, &t); }", "kCube"),
    ("__global__ __aicore__ void k(GM_ADDR a) { Add(x, y, z, 8); }", "kAuto"),
    ("extern \"C\" __global__ __cube__ void k(GM_ADDR a);", "kCube"),  # declared here, defined elsewhere
    ("void k(GM_ADDR a) { /* __cube__ */ }", "kAuto"),  # not a kernel; the marker is a comment
    ("", "kAuto"),
])
def test_kernel_kind_comes_from_the_definition(definition, kind):
    text = definition + "\nint launch() { return k<<<4, nullptr, nullptr>>>(p); }\n"
    assert src.kernel_kind(text, "k") == kind
    assert f"KernelKind::{kind}>(k," in src.rewrite_launches(text)


def test_kind_of_a_template_kernel():
    text = ("template <uint32_t N>\n__global__ __cube__ void mm(GM_ADDR a) {}\n"
            "void f() { mm<16><<<2, nullptr, nullptr>>>(p); }\n")
    assert 'KernelKind::kCube>(mm<16>, "mm<16>", 2' in src.rewrite_launches(text)


@pytest.mark.parametrize("text, message", [
    ("x = <<<1, 0, 0>>>(a);", "line 1: '<<<' is not preceded by a kernel name"),
    ("\nk<<<1, 0, 0(a);", "line 2: '<<<' has no matching '>>>'"),
    ("k<<<1, 0, 0, 5>>>(a);", "line 1: a launch takes <<<blockDim, l2ctrl, stream>>>, got 4 values"),
    ("k<<<1, 0, 0>>>;", "line 1: '>>>' is not followed by the kernel's argument list"),
    ("k<<<1, 0, 0>>>(a;", "line 1: the kernel's argument list is not closed"),
    ("k<<< >>>(a);", "line 1: the launch has no blockDim"),
])
def test_malformed_launches_name_the_line(text, message):
    with pytest.raises(src.AscendcSourceError, match=message.replace("[", r"\[").replace("(", r"\(")):
        src.rewrite_launches(text)


def test_is_ascendc_source(tmp_path):
    assert src.is_ascendc_source("kernel.asc")  # by suffix, existing or not
    assert src.is_ascendc_source(tmp_path / "missing.asc")
    cpp = tmp_path / "k.cpp"
    cpp.write_text('#include "kernel_operator.h"\nint x;\n')
    assert src.is_ascendc_source(cpp) and src.is_ascendc_source(str(cpp))
    plain = tmp_path / "plain.cpp"
    plain.write_text("#include <vector>\nint main() { return 0; }\n")
    assert not src.is_ascendc_source(plain)
    assert src.is_ascendc_source('#include <kernel_operator.h>\n')
    assert src.is_ascendc_source("extern \"C\" __global__ __aicore__ void k(GM_ADDR x) {}\n")
    assert src.is_ascendc_source("void f() { k<<<1, nullptr, s>>>(x); }\n")
    assert not src.is_ascendc_source('// #include "kernel_operator.h"\nint x;\n')
    assert not src.is_ascendc_source('const char* s = "__aicore__ <<<";\n')
    assert not src.is_ascendc_source("int main() { return 0; }")
    with pytest.raises(TypeError):
        src.is_ascendc_source(42)
