#!/usr/bin/python3
"""Include rules between collx's policy folders.

  algorithms (algo/)     never include a transport or an executor header
  protocols (proto/)     never include an algorithm or an executor header
  transports (transport/) never include a protocol header
  detail/                never includes any policy (algo/, proto/, transport/, exec/)
  every header outside cuda/ stays free of the CUDA runtime: no cuda_runtime*.h,
  cuda.h or collx/cuda/ (the CUDA layer is opt-in; libcu++'s cuda/... headers
  are not the runtime and are allowed)

A policy reaches another only through the primitives and the concepts, so
that a new transport or executor is one file and not an edit of every
schedule. Usage: check_includes.py [include/collx]. Prints every violation
as file:line and exits 1 if there is one that ALLOWED does not list.
"""
import pathlib
import re
import sys

# folder -> (folders it must not include, what those are)
RULES = {
    "algo": {"transport": "a transport", "exec": "an executor"},
    "proto": {"algo": "an algorithm", "exec": "an executor"},
    "transport": {"proto": "a protocol"},
    "detail": {"algo": "an algorithm", "proto": "a protocol", "transport": "a transport", "exec": "an executor"},
}

# Known violations being removed, each (file, included header) with the reason.
# An entry whose violation is gone is reported as stale, so the list shrinks.
ALLOWED = {
    # Every arrow that breaks a rule, with the reason it is tolerated for now.
    # Empty: the rules hold without exceptions.
}

CUDA_RUNTIME = re.compile(r"^(cuda_runtime(_api)?\.h|cuda\.h|collx/cuda/.*)$")
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]')


def target_of(header, source, root):
    """The include's path relative to include/collx, or None outside collx."""
    if header.startswith("collx/"):
        return header[len("collx/"):]
    local = (source.parent / header).resolve()
    try:
        return str(local.relative_to(root.resolve()))
    except ValueError:
        return None


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "include/collx")
    if not root.is_dir():
        print(f"check_includes: no directory {root}", file=sys.stderr)
        return 2
    violations, allowed_seen = [], set()
    for source in sorted(root.rglob("*")):
        if source.suffix not in (".hpp", ".h", ".cuh", ".inl"):
            continue
        rel = source.relative_to(root).as_posix()
        folder = rel.split("/")[0]
        if folder != "cuda" or "/" not in rel:
            for number, line in enumerate(source.read_text(errors="replace").splitlines(), 1):
                m = INCLUDE.match(line)
                if m and CUDA_RUNTIME.match(m.group(1)):
                    violations.append(f"{root.as_posix()}/{rel}:{number}: only cuda/ may include the CUDA "
                                      f"runtime or the CUDA layer: {m.group(1)}")
        if folder not in RULES or "/" not in rel:
            continue
        for number, line in enumerate(source.read_text(errors="replace").splitlines(), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            target = target_of(m.group(1), source, root)
            if target is None or "/" not in target:
                continue
            what = RULES[folder].get(target.split("/")[0])
            if what is None:
                continue
            key = (rel, target)
            where = f"{root.as_posix()}/{rel}:{number}"
            if key in ALLOWED:
                allowed_seen.add(key)
                print(f"{where}: allowed for now ({ALLOWED[key]}): {folder}/ includes {what} header, collx/{target}")
            else:
                violations.append(f"{where}: {folder}/ must not include {what} header: collx/{target}")
    for key in sorted(set(ALLOWED) - allowed_seen):
        print(f"note: stale allow-list entry, the violation is gone: {key[0]} -> {key[1]} (delete it from ALLOWED)")
    for v in violations:
        print(v)
    if violations:
        print(f"check_includes: {len(violations)} include rule violation(s)")
        return 1
    print(f"check_includes: rules hold ({len(allowed_seen)} allowed for now)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
