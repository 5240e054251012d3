"""The house rules, checked from the code itself (issue 16, ../shared/STYLE.md).

    python3 tests/house.py [--repo DIR]     print every finding, exit 1 if any

- No circle: no two files depend on each other, directly or through others.
  Python by its imports (also those inside functions), Rust by `use` and
  `crate::`/`super::` paths outside test code (`mod x;` is not a use, a
  `pub use` re-export is), C by the functions and globals one object file
  takes from another (nm of each file of lib/src compiled alone).
- No function over 80 lines outside tests, no Python module over 500 lines,
  unless a one-line reason stands directly above it: `# long: why` (Python),
  `// long: why` (Rust), `/* long: why */` or `// long: why` (C); for a
  module, in its first five lines.
- No block of six or more lines repeated between lib/src/coll and lib/src/shim.

tests/test_house.py asserts each rule; this file is also a command, to see
every finding at once while moving code.
"""
from __future__ import annotations

import argparse
import ast
import hashlib
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

MAX_FUNCTION_LINES = 80
MAX_PYTHON_MODULE_LINES = 500
REPEAT_WINDOW = 6
PYTHON_PACKAGE = "python/wanmpi"
C_SOURCES = "lib/src"
LIBRARIES_APART = ("lib/src/coll", "lib/src/shim")
C_PROGRAMS = ("bench",)      # MPI benchmark programs: their functions count too
OPENMPI_CC = "/usr/bin/mpicc.openmpi"


@dataclass(frozen=True)
class LongPiece:
    path: str
    name: str
    line: int
    lines: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.name} has {self.lines} lines"


# ---------------------------------------------------------------- circles

def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            advanced = False
            for nxt in successors:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(edges.get(nxt, ())))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def has_reason(lines: list[str], line_index: int, marker: re.Pattern) -> bool:
    """A `long: why` comment on the line directly above (0-based index of the first line)."""
    return line_index > 0 and bool(marker.search(lines[line_index - 1]))


# ---------------------------------------------------------------- Python

PY_REASON = re.compile(r"^\s*#\s*long:\s*\S")


def python_modules(repo: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package."""
    root = repo / PYTHON_PACKAGE
    modules = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def python_imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()

    def add(target: str, names: list[str]):
        submodules = [f"{target}.{n}" for n in names if f"{target}.{n}" in modules]
        found.update(submodules)
        if len(submodules) < len(names) or not names:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target:
                found.add(target)

    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, [])
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            add(target, [a.name for a in node.names])
    found.discard(name)
    return found


def python_circles(repo: Path) -> list[list[str]]:
    modules = python_modules(repo)
    edges = {name: python_imports(name, path, modules) for name, path in modules.items()}
    return [[str(modules[m].relative_to(repo)) for m in c] for c in circles(edges)]


def python_long_pieces(repo: Path) -> list[LongPiece]:
    found = []
    for path in python_modules(repo).values():
        text = path.read_text()
        lines = text.splitlines()
        rel = str(path.relative_to(repo))
        if len(lines) > MAX_PYTHON_MODULE_LINES and not any(PY_REASON.search(l) for l in lines[:5]):
            found.append(LongPiece(rel, "module", 1, len(lines)))
        for node in ast.walk(ast.parse(text, str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = min([node.lineno] + [d.lineno for d in node.decorator_list])
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES and not has_reason(lines, first - 1, PY_REASON):
                    found.append(LongPiece(rel, node.name, node.lineno, length))
    return found


# ---------------------------------------------------------------- code text

def blank_rust(text: str) -> str:
    """Comments, strings and char literals replaced by spaces (newlines kept)."""
    return _blank(text, rust=True)


def blank_c(text: str) -> str:
    """Comments, strings, char literals and preprocessor lines replaced by spaces."""
    return _blank(text, rust=False)


def _blank(text: str, rust: bool) -> str:
    out = []
    i, n = 0, len(text)
    line_start = True

    def spaces(chunk: str) -> str:
        return re.sub(r"[^\n]", " ", chunk)

    while i < n:
        c = text[i]
        if not rust and line_start and c == "#":
            j = i
            while j < n and (text[j] != "\n" or text[j - 1] == "\\"):
                j += 1
            out.append(spaces(text[i:j]))
            i = j
            continue
        if c == "\n":
            line_start = True
        elif not c.isspace():
            line_start = False
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if rust and text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
        elif rust and (m := re.match(r'b?r(#*)"', text[i:i + 40])) and (i == 0 or not text[i - 1].isalnum()):
            close = '"' + m.group(1)
            j = text.find(close, i + m.end())
            j = n if j < 0 else j + len(close)
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j += 1
        elif c == "'":
            if text.startswith("\\", i + 1):
                j = text.find("'", i + 3) + 1 or n
            elif i + 2 < n and text[i + 2] == "'":
                j = i + 3
            else:                      # a Rust lifetime or label
                out.append(c)
                i += 1
                continue
        else:
            out.append(c)
            i += 1
            continue
        out.append(spaces(text[i:j]))
        i = j
    return "".join(out)


def matching_brace(text: str, open_at: int) -> int:
    depth = 0
    for j in range(open_at, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(text) - 1


def line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


# ---------------------------------------------------------------- Rust

RUST_REASON = re.compile(r"^\s*//\s*long:\s*\S")
RUST_FN = re.compile(r"(?m)^[ \t]*(?:pub(?:\([^)]*\))?\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?"
                     r"(?:extern\s+\"[^\"]*\"\s+)?fn\s+(\w+)")
RUST_TEST_ITEM = re.compile(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*\{|#\[test\]")


def rust_sources(repo: Path) -> list[Path]:
    return sorted(p for p in (repo / "crates").glob("*/src/**/*.rs"))


def rust_without_tests(text: str) -> str:
    """Test modules and #[test] functions blanked (lines kept), after comments and strings."""
    code = blank_rust(text)
    while m := RUST_TEST_ITEM.search(code):
        end = matching_brace(code, code.index("{", m.end() - 1 if code[m.end() - 1] == "{" else m.end()))
        code = code[: m.start()] + re.sub(r"[^\n]", " ", code[m.start(): end + 1]) + code[end + 1:]
    return code


def rust_module_path(src: Path, path: Path) -> tuple[str, ...]:
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] in ("lib", "main", "mod"):
        parts.pop()
    return tuple(parts)


def rust_use_paths(code: str) -> list[list[str]]:
    """Every path a file names: `use` trees expanded, plus inline crate::/super:: paths."""
    paths = []

    def expand(prefix: list[str], tree: str):
        tree = tree.strip()
        if not tree:
            return
        m = re.match(r"((?:\w+\s*::\s*)*)\{(.*)\}$", tree, re.S)
        if m:
            head = [p.strip() for p in m.group(1).split("::") if p.strip()]
            depth, start, body = 0, 0, m.group(2)
            for j, ch in enumerate(body + ","):
                if ch in "{":
                    depth += 1
                elif ch == "}":
                    depth -= 1
                elif ch == "," and depth == 0:
                    expand(prefix + head, body[start:j])
                    start = j + 1
            return
        tree = re.sub(r"\s+as\s+\w+$", "", tree)
        paths.append(prefix + [p.strip() for p in tree.split("::") if p.strip()])

    for m in re.finditer(r"\buse\s+([^;]+);", code):
        expand([], m.group(1))
    for m in re.finditer(r"(?<![\w:])((?:crate|super|self)(?:\s*::\s*(?:\w+|\*))+)", code):
        paths.append([p.strip() for p in m.group(1).split("::")])
    return paths


def rust_crate_edges(src: Path, crate_name: str) -> dict[str, set[str]]:
    files = {rust_module_path(src, p): p for p in sorted(src.rglob("*.rs")) if p.name != "main.rs"}
    main = src / "main.rs"
    edges: dict[str, set[str]] = {}
    for path in sorted(src.rglob("*.rs")):
        here = rust_module_path(src, path)
        is_dir_module = path.name in ("lib.rs", "main.rs", "mod.rs")
        code = rust_without_tests(path.read_text())
        targets = set()
        module = here if is_dir_module else None        # only a directory module has children
        children = {k[-1] for k in files if module is not None and len(k) == len(module) + 1
                    and k[:-1] == module}
        relative = [[p.strip() for p in m.group(1).split("::")] for child in children
                    for m in re.finditer(rf"(?<![\w:])({child}(?:\s*::\s*(?:\w+|\*))+)", code)]
        for parts in rust_use_paths(code) + relative:
            if parts[0] in children:                     # a child module by its own name (2018 paths)
                absolute = list(module) + parts
            elif parts[0] == "crate" or (path == main and parts[0] == crate_name):
                absolute = parts[1:]
            elif parts[0] in ("super", "self"):
                base = list(here if is_dir_module else here[:-1]) if parts[0] == "super" else list(here)
                if parts[0] == "super" and is_dir_module:
                    base = base[:-1]
                rest = parts[1:]
                while rest and rest[0] == "super":
                    base, rest = base[:-1], rest[1:]
                absolute = base + rest
            else:
                continue
            for length in range(len(absolute), -1, -1):
                if tuple(absolute[:length]) in files:
                    target = files[tuple(absolute[:length])]
                    if target != path:
                        targets.add(str(target))
                    break
        edges[str(path)] = targets
    return edges


def rust_circles(repo: Path) -> list[list[str]]:
    found = []
    for src in sorted((repo / "crates").glob("*/src")):
        crate_name = src.parent.name.replace("-", "_")
        edges = rust_crate_edges(src, crate_name)
        found += [[str(Path(p).relative_to(repo)) for p in c] for c in circles(edges)]
    return found


def rust_long_pieces(repo: Path) -> list[LongPiece]:
    found = []
    for path in rust_sources(repo):
        text = path.read_text()
        lines = text.splitlines()
        code = rust_without_tests(text)
        for m in RUST_FN.finditer(code):
            brace, semi = code.find("{", m.end()), code.find(";", m.end())
            if brace < 0 or (0 <= semi < brace):
                continue                              # a declaration without a body
            first = line_of(code, m.start())
            length = line_of(code, matching_brace(code, brace)) - first + 1
            start = first - 1
            while start > 0 and lines[start - 1].strip().startswith("#["):
                start -= 1                            # attributes sit between the reason and the fn
            if length > MAX_FUNCTION_LINES and not has_reason(lines, start, RUST_REASON):
                found.append(LongPiece(str(path.relative_to(repo)), m.group(1), first, length))
    return found


# ---------------------------------------------------------------- C

C_REASON = re.compile(r"^\s*(/\*|//)\s*long:\s*\S")
C_NOT_FUNCTION = re.compile(r"=|\b(struct|union|enum)\b[^()]*$")


def c_functions(text: str) -> list[tuple[str, int, int]]:
    """(name, first line, line count) of every function definition in a C file."""
    code = blank_c(text)
    found = []
    depth, chunk_start = 0, 0
    for j, ch in enumerate(code):
        if ch == "{":
            if depth == 0:
                head = code[chunk_start:j]
                m = re.search(r"(\w+)\s*\([^()]*(?:\([^()]*\)[^()]*)*\)\s*$", head)
                if m and not C_NOT_FUNCTION.search(head[: m.start()]) and m.group(1) not in ("if", "while"):
                    stripped = len(head) - len(head.lstrip())
                    first = line_of(code, chunk_start + stripped)
                    found.append((m.group(1), first, line_of(code, matching_brace(code, j)) - first + 1))
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                chunk_start = j + 1
        elif ch == ";" and depth == 0:
            chunk_start = j + 1
    return found


def c_files(repo: Path) -> list[Path]:
    files = sorted((repo / C_SOURCES).rglob("*.c"))
    for folder in C_PROGRAMS:
        files += sorted((repo / folder).rglob("*.c"))
    return files


def c_long_pieces(repo: Path) -> list[LongPiece]:
    found = []
    for path in c_files(repo):
        text = path.read_text()
        lines = text.splitlines()
        for name, first, length in c_functions(text):
            if length > MAX_FUNCTION_LINES and not has_reason(lines, first - 1, C_REASON):
                found.append(LongPiece(str(path.relative_to(repo)), name, first, length))
    return found


def c_symbols(repo: Path) -> dict[Path, tuple[set[str], set[str]]]:
    """For every file of lib/src: the global symbols its object defines and those it needs."""
    result = {}
    with tempfile.TemporaryDirectory(prefix="wanmpi-house-") as tmp:
        for n, path in enumerate(sorted((repo / C_SOURCES).rglob("*.c"))):
            obj = Path(tmp) / f"{n}.o"
            subprocess.run([OPENMPI_CC, "-c", "-O0", "-w", "-fPIC", f"-I{repo / 'lib/include'}",
                            f"-I{repo / C_SOURCES}", "-o", str(obj), str(path)],
                           check=True, capture_output=True, text=True)
            listing = subprocess.run(["nm", str(obj)], check=True, capture_output=True, text=True).stdout
            defined, needed = set(), set()
            for row in listing.splitlines():
                fields = row.split()
                if len(fields) >= 2 and fields[-2] == "U":
                    needed.add(fields[-1])
                elif len(fields) == 3 and fields[1] in "TDBRCVWG":
                    defined.add(fields[2])
            result[path] = (defined, needed)
    return result


def c_circles(repo: Path) -> list[list[str]]:
    symbols = c_symbols(repo)
    definers: dict[str, set[Path]] = {}
    for path, (defined, _) in symbols.items():
        for name in defined:
            definers.setdefault(name, set()).add(path)
    edges = {str(path.relative_to(repo)): {str(d.relative_to(repo)) for name in needed
                                           for d in definers.get(name, ()) if d != path}
             for path, (_, needed) in symbols.items()}
    return circles(edges)


def normalised_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, code) of the lines that carry code: no blanks, comments, lone braces or includes."""
    code = blank_c(path.read_text())
    rows = []
    for number, line in enumerate(code.splitlines(), 1):
        line = " ".join(line.split())
        if len(line) > 2:
            rows.append((number, line))
    return rows


def repeated_between_libraries(repo: Path) -> list[str]:
    windows: dict[str, list[dict[str, str]]] = {}
    for side, folder in enumerate(LIBRARIES_APART):
        for path in sorted((repo / folder).rglob("*.[ch]")):
            rows = normalised_lines(path)
            for k in range(len(rows) - REPEAT_WINDOW + 1):
                block = "\n".join(text for _, text in rows[k:k + REPEAT_WINDOW])
                key = hashlib.sha1(block.encode()).hexdigest()
                windows.setdefault(key, [{}, {}])[side].setdefault(
                    "x", f"{path.relative_to(repo)}:{rows[k][0]}")
    return sorted(f"{a['x']} ~ {b['x']}" for a, b in windows.values() if a and b)


# ---------------------------------------------------------------- command

def findings(repo: Path) -> dict[str, list[str]]:
    return {
        "circles (Python)": [" -> ".join(c) for c in python_circles(repo)],
        "circles (Rust)": [" -> ".join(c) for c in rust_circles(repo)],
        "circles (C)": [" -> ".join(c) for c in c_circles(repo)],
        "long (Python)": [str(p) for p in python_long_pieces(repo)],
        "long (Rust)": [str(p) for p in rust_long_pieces(repo)],
        "long (C)": [str(p) for p in c_long_pieces(repo)],
        "repeated between libwanmpi and libwanshim": repeated_between_libraries(repo),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repo", type=Path, default=Path(__file__).resolve().parents[1])
    args = p.parse_args(argv)
    total = 0
    for rule, rows in findings(args.repo.resolve()).items():
        print(f"{rule}: {len(rows) or 'none'}")
        for row in rows:
            print(f"  {row}")
        total += len(rows)
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
