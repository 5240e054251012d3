"""The house rules hold (tests/house.py; issue 16): no circle between files in
any language, no long function or Python module without a stated reason, no
code repeated between libwanmpi and libwanshim. Run `python3 tests/house.py`
to see every finding at once."""
from __future__ import annotations

from pathlib import Path

import pytest

import house

REPO = Path(__file__).resolve().parents[1]


def test_no_circle_between_python_modules():
    assert house.python_circles(REPO) == []


def test_no_circle_between_rust_modules():
    assert house.rust_circles(REPO) == []


def test_no_circle_between_c_files():
    assert house.c_circles(REPO) == []


@pytest.mark.parametrize("language", ["python", "rust", "c"])
def test_no_long_function_without_a_reason(language):
    long_pieces = getattr(house, f"{language}_long_pieces")(REPO)
    assert [str(p) for p in long_pieces] == []


def test_no_code_repeated_between_the_libraries():
    assert house.repeated_between_libraries(REPO) == []


# The checker itself finds what it looks for.

def test_checker_finds_a_circle_through_three_nodes():
    assert house.circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert house.circles({"a": {"b"}, "b": set()}) == []


def test_checker_reads_python_imports_also_inside_functions(tmp_path):
    package = tmp_path / house.PYTHON_PACKAGE
    (package / "job").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "job" / "__init__.py").write_text("")
    (package / "topo.py").write_text("def f():\n    from .job import launch\n")
    (package / "job" / "launch.py").write_text("from ..topo import f\n")
    assert house.python_circles(tmp_path) == [["python/wanmpi/job/launch.py", "python/wanmpi/topo.py"]]


def test_checker_reads_rust_use_trees_and_skips_test_modules(tmp_path):
    src = tmp_path / "crates" / "demo" / "src"
    src.mkdir(parents=True)
    (src / "lib.rs").write_text("mod a;\nmod b;\n")
    (src / "a.rs").write_text("use crate::{b::Thing, x};\npub struct Other;\n")
    (src / "b.rs").write_text('pub struct Thing;\n#[cfg(test)]\nmod tests {\n    use crate::a::Other;\n}\n')
    assert house.rust_circles(tmp_path) == []
    (src / "b.rs").write_text("pub struct Thing;\nfn f() -> super::a::Other { todo!(\"{\") }\n")
    assert house.rust_circles(tmp_path) == [["crates/demo/src/a.rs", "crates/demo/src/b.rs"]]


def test_checker_follows_a_parent_calling_its_child_module_by_name(tmp_path):
    src = tmp_path / "crates" / "demo" / "src"
    (src / "transport").mkdir(parents=True)
    (src / "lib.rs").write_text("mod transport;\n")
    (src / "transport" / "mod.rs").write_text("mod tcp;\npub trait Link {}\nfn go() { tcp::start(); }\n")
    (src / "transport" / "tcp.rs").write_text("pub fn start() {}\n")
    assert house.rust_circles(tmp_path) == []
    (src / "transport" / "tcp.rs").write_text("use super::Link;\npub fn start() {}\n")
    assert house.rust_circles(tmp_path) == [["crates/demo/src/transport/mod.rs", "crates/demo/src/transport/tcp.rs"]]


def test_checker_measures_functions_and_honours_a_reason(tmp_path):
    body = "".join(f"    x += {i};\n" for i in range(85))
    c_text = f"static const char *s = \"{{\";\nint f(int x)\n{{\n{body}    return x;\n}}\n"
    assert house.c_functions(c_text) == [("f", 2, 89)]
    rust = tmp_path / "crates" / "demo" / "src"
    rust.mkdir(parents=True)
    (rust / "lib.rs").write_text(f"pub fn f(mut x: u32) -> u32 {{\n{body}    x\n}}\n")
    assert [p.lines for p in house.rust_long_pieces(tmp_path)] == [88]
    (rust / "lib.rs").write_text(f"// long: one table\npub fn f(mut x: u32) -> u32 {{\n{body}    x\n}}\n")
    assert house.rust_long_pieces(tmp_path) == []
