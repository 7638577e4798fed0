#!/usr/bin/python3
"""The README's C++ examples compile.

Every fenced block whose info string starts with cpp (or c++) is either

  a complete program (it defines main):  written to a file, compiled and
      linked against collx's headers the way the README tells users to
      (-std=c++20 -pthread, include/ on the include path), nothing run;
  a fragment (no main: API excerpts, one-liners):  reported as skipped.

Markers after the language word, on the fence line:

  ```cpp fragment      skip the block even though it defines main
  ```cpp syntax-only   compile with -fsyntax-only (a program that needs
                       something the check does not provide to link)

Usage: check_readme.py --cxx COMPILER --include DIR README.md [more.md ...]
Prints each block as README.md:LINE with what was done, the compiler's
output for a block that fails, and exits 1 if any block fails or no block
was compiled at all (so the check cannot pass by finding nothing).
"""
import argparse
import pathlib
import re
import subprocess
import sys
import tempfile

FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([^\s`]*)\s*(.*)$")
MAIN = re.compile(r"\bint\s+main\s*\(")
CPP = {"cpp", "c++", "cxx"}


def blocks(path):
    """(first line number, language, markers, code) of every fenced block."""
    out, lines = [], path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lang, rest = m.group(2), m.group(3).lower(), m.group(4).split()
        start, body = i + 1, []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i])
            i += 1
        i += 1  # the closing fence
        out.append((start + 1, lang, rest, "\n".join(body) + "\n"))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cxx", required=True)
    ap.add_argument("--include", required=True)
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    failed = compiled = 0
    with tempfile.TemporaryDirectory(prefix="collx-readme-") as tmp:
        for f in map(pathlib.Path, a.files):
            for line, lang, markers, code in blocks(f):
                if lang not in CPP:
                    continue
                where = f"{f.name}:{line}"
                if "fragment" in markers or not MAIN.search(code):
                    print(f"{where}: skipped (fragment{'' if 'fragment' in markers else ': no main()'})")
                    continue
                src = pathlib.Path(tmp) / f"block_{line}.cpp"
                # #line: the compiler's messages name the README's lines.
                src.write_text(f'#line {line} "{f}"\n' + code, encoding="utf-8")
                cmd = [a.cxx, "-std=c++20", "-O0", "-I", a.include, str(src)]
                if "syntax-only" in markers:
                    cmd += ["-fsyntax-only"]
                else:
                    cmd += ["-o", str(src.with_suffix("")), "-pthread"]
                r = subprocess.run(cmd, capture_output=True, text=True)
                compiled += 1
                how = "syntax checked" if "syntax-only" in markers else "compiled and linked"
                if r.returncode == 0:
                    print(f"{where}: {how}")
                else:
                    failed += 1
                    print(f"{where}: FAILED to compile ({' '.join(cmd)}):\n{r.stdout}{r.stderr}")
    if compiled == 0:
        print("no complete C++ program found in " + ", ".join(a.files))
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
