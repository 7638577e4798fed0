#!/usr/bin/env python3
"""The memory operations of the device instantiation check's PTX (no GPU needed).

  check_ptx.py FILE.ptx[.gz]...

Rules, each a property of FIFO lines and step counters that the host tests
cannot see:

  no-nc        no non-coherent load (ld.*.nc, the read-only data cache): a
               FIFO line or a counter another rank writes would be read stale.
  scope        every acquire load, release store and atomic with a scope uses
               .sys or .gpu, never .cta or .cluster (the peer is another
               block at least); and a kernel that releases or fences at .gpu
               scope (exec::cuda::one_gpu: every rank on one GPU) also does
               so at .sys scope, the branch for groups across GPUs or with
               host regions.
  posts        every kernel that waits (acquire loads, or relaxed
               system-scope polls closed by an acquire fence) also publishes
               with release stores, or with a system-scope release fence
               followed by relaxed system-scope stores (a protocol step pairs
               them; the mesh's peer-memory barrier stores one count into
               every rank's region after one fence).
  ll-volatile  every kernel of an LL or LL128 schedule polls its lines with
               volatile global loads (the flag is in the line: no counter to
               acquire, and the load must not be served from a cache); not
               for algorithms on peer memory (nvls), which touch no FIFO
               whatever protocol they are instantiated with.
  simple-poll  every kernel of a Simple schedule acquires once a wait on a
               counter is over (fence.acq_rel.sys or fence.sc.sys, by
               exec::cuda::wait): its polls are relaxed system-scope loads
               (detail::load_polled), which, unlike acquire loads, do not
               invalidate the SM's L1 at every spin, so the fence is what
               orders the slot's reads after the counter.
  narrow-hw    every kernel that reduces a narrow float type (all_reduce,
               reduce_scatter, reduce of half, bfloat16, e4m3, e5m2) rounds
               its results with the GPU's cvt, and for half and bfloat16
               summed, averaged or multiplied also combines pairs with one
               packed instruction (collx/numeric/hardware.hpp), instead of
               the portable bit manipulation. fp8's cvt from sm_89 and the
               bf16 one from sm_80: checked where the PTX's target has them.
  multimem     every multimem instruction (an NVSwitch multicast load-reduce
               or store) is relaxed at system scope, the ordering its
               barriers assume; and from sm_90, every nvls all_reduce over
               the mesh (nvls_mesh_kernel) of an element type and operation
               the switch reduces has the switch channel's load-reduce for
               that type and its 16-byte store, and one the switch does not
               reduce has no load-reduce (transport/multimem.hpp); nvls
               all_gather and broadcast over the mesh store through it; a kernel
               with multimem instructions has the proxy fence that relates
               them to ordinary accesses of the same memory (fence.proxy.alias).

A kernel's operations include those of the device functions it calls. Exits
non-zero naming the rule, the kernel and the instruction.
"""
import gzip
import re
import sys

ENTRY = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+)?\.(entry|func)\s+(?:\([^)]*\)\s*)?([\w$]+)")
CALL = re.compile(r"\bcall(?:\.uni)?\s[^;]*?([_A-Za-z][\w$]*)\s*,?\s*\(")
CALL_SIMPLE = re.compile(r"\bcall(?:\.uni)?\s+([_A-Za-z][\w$]*)\s*;")
MEMOP = re.compile(r"\b(ld|st|atom|red)((?:\.[a-z0-9_]+)+)")
RELEASE_FENCE = re.compile(r"\bfence\.(?:acq_rel|sc|release)\.sys\b")
ACQUIRE_FENCE = re.compile(r"\bfence\.(?:acq_rel|sc|acquire)\.sys\b")
SCOPED = re.compile(r"\.(acquire|release|relaxed|acq_rel|sc)\b.*\.(cta|cluster|gpu|sys)\b|\.(cta|cluster|gpu|sys)\b")

# As they appear in mangled kernel names (the namespace may be a substitution).
PROTOCOLS = {"simple": "5proto6simpleE", "ll": "5proto2llE", "ll128": "5proto5ll128E"}
# Algorithms on peer memory (no FIFO, no protocol axis).
PEER_MEMORY = ("4algo4nvlsE",)

# narrow-hw: mangled type -> (lowest sm with the cvt, the narrowing cvt, the
# packed arithmetic (None: none for this type)).
NARROW = {
    "6half_tE": (53, "cvt.rn.f16.f32", ("add.rn.f16x2", "mul.rn.f16x2")),
    "10bfloat16_tE": (80, "cvt.rn.bf16.f32", ("add.rn.bf16x2", "mul.rn.bf16x2", "fma.rn.bf16x2")),
    "13float8_e4m3_tE": (89, "cvt.rn.satfinite.e4m3x2.f32", None),
    "13float8_e5m2_tE": (89, "cvt.rn.satfinite.e5m2x2.f32", None),
}
REDUCING = re.compile(r"4collE([024])E")  # all_reduce, reduce_scatter, reduce
OP = re.compile(r"9reduce_opE(\d)E")  # 0 sum, 1 prod, 4 avg
TARGET = re.compile(r"^\s*\.target\s+sm_(\d+)", re.M)

# multimem: nvls over the mesh, as instantiate_algos.cu names it:
# nvls_mesh_kernel<coll, T, reduce_op>.
MESH_NVLS = re.compile(r"16nvls_mesh_kernelILNS_4collE(\d)E(\w+?)LNS_9reduce_opE(\d)E")
MULTIMEM = re.compile(r"\bmultimem\.[\w:.]+")
# mangled type -> (the load-reduce's type suffix, operations the switch
# reduces: 0 sum, 2 min, 3 max, 4 avg, 5 and, 6 or, 7 xor).
SWITCH = {
    "f": (".f32", {"0", "4"}),
    "d": (".f64", {"0", "4"}),
    "NS_6half_tE": (".f16x2", {"0", "4"}),  # not min/max: the switch's NaN rule is not reducer<>'s
    "NS_10bfloat16_tE": (".bf16x2", {"0", "4"}),
    "i": ("32", {"0", "2", "3", "4", "5", "6", "7"}),
    "j": ("32", {"0", "2", "3", "4", "5", "6", "7"}),
    "l": ("64", {"0", "2", "3", "4", "5", "6", "7"}),
    "m": ("64", {"0", "2", "3", "4", "5", "6", "7"}),
}


def functions(text):
    """name -> (kind, body lines), in file order."""
    out, cur = {}, None
    depth = 0
    for line in text.splitlines():
        m = ENTRY.match(line)
        if m and depth == 0:
            cur = m.group(2)
            out[cur] = (m.group(1), [])
            continue
        if cur is None:
            continue
        depth += line.count("{") - line.count("}")
        out[cur][1].append(line)
        if depth == 0 and "}" in line:
            cur = None
    return out


def reach(funcs, name, seen=None):
    """The lines of `name` and of every function it calls."""
    seen = set() if seen is None else seen
    if name in seen or name not in funcs:
        return []
    seen.add(name)
    lines = list(funcs[name][1])
    for line in funcs[name][1]:
        for m in list(CALL.finditer(line)) + list(CALL_SIMPLE.finditer(line)):
            lines += reach(funcs, m.group(1), seen)
    return lines


def ops(lines):
    for line in lines:
        code = line.split("//")[0]
        for m in MEMOP.finditer(code):
            yield m.group(1) + m.group(2), code.strip()


def check(path):
    # gpu-bundle.sh carries the PTX compressed (the device tool's carry limit).
    text = gzip.open(path, "rt").read() if path.endswith(".gz") else open(path).read()
    funcs = functions(text)
    entries = [n for n, (k, _) in funcs.items() if k == "entry"]
    target = TARGET.search(text)
    sm = int(target.group(1)) if target else 0
    errors = []
    if not entries:
        errors.append(f"{path}: no kernel found (is this the instantiation check's PTX?)")
    for name in entries:
        lines = reach(funcs, name)
        kinds = [op for op, _ in ops(lines)]
        for op, code in ops(lines):
            if "nc" in op.split(".")[1:]:
                errors.append(f"no-nc: {name}: {code}")
            scopes = [s for s in ("cta", "cluster", "gpu", "sys") if f".{s}" in op]
            ordered = any(f".{o}" in op for o in ("acquire", "release", "acq_rel", "relaxed", "sc"))
            if (ordered or op.startswith(("atom", "red"))) and scopes and not set(scopes) <= {"sys", "gpu"}:
                errors.append(f"scope: {name}: {code}")
        acquires = [k for k in kinds if k.startswith("ld.") and ".acquire" in k]
        releases = [k for k in kinds if k.startswith("st.") and ".release" in k]
        fenced = any(RELEASE_FENCE.search(line.split("//")[0]) for line in lines) and any(
            k.startswith("st.") and ".relaxed" in k and ".sys" in k for k in kinds)
        body = "\n".join(line.split("//")[0] for line in lines)
        for gpu_form, sys_form in (("st.release.gpu", "st.release.sys"), ("fence.acq_rel.gpu", "fence.acq_rel.sys")):
            if gpu_form in body and sys_form not in body:
                errors.append(f"scope: {name}: {gpu_form} without {sys_form} (no system-scope branch)")
        relaxed_polls = [k for k in kinds if k.startswith("ld.") and ".relaxed" in k and ".sys" in k]
        acquire_fenced = any(ACQUIRE_FENCE.search(line.split("//")[0]) for line in lines)
        if (acquires or (relaxed_polls and acquire_fenced)) and not releases and not fenced:
            errors.append(f"posts: {name}: waits (acquire loads or fenced polls) and no release store")
        protos = [p for p, tag in PROTOCOLS.items() if tag in name]
        runtime = "5proto7runtimeI" in name
        peer_memory = any(tag in name for tag in PEER_MEMORY)
        if (any(p in ("ll", "ll128") for p in protos) or runtime) and not peer_memory:
            if not any(k.startswith("ld.volatile.global") for k in kinds):
                errors.append(f"ll-volatile: {name}: no volatile global load (LL lines are polled with them)")
        if ("simple" in protos or runtime) and not peer_memory:
            if not acquire_fenced:
                errors.append(f"simple-poll: {name}: no acquire fence after its polls")
        narrow = [v for tag, v in NARROW.items() if tag in name]
        if narrow and REDUCING.search(name) and sm >= narrow[0][0]:
            lowest, cvt, packed = narrow[0]
            code = "\n".join(l.split("//")[0] for l in lines)
            if cvt not in code:
                errors.append(f"narrow-hw: {name}: reduces without {cvt}")
            op = OP.search(name)
            if packed and op and op.group(1) in ("0", "1", "4") and not any(p in code for p in packed):
                errors.append(f"narrow-hw: {name}: no packed {' / '.join(packed)}")
        code = "\n".join(l.split("//")[0] for l in lines)
        for mm in MULTIMEM.findall(code):
            if ".relaxed.sys." not in mm:
                errors.append(f"multimem: {name}: {mm} (not relaxed at system scope)")
        if MULTIMEM.search(code) and "fence.proxy.alias" not in code:
            errors.append(f"multimem: {name}: multicast accesses without fence.proxy.alias at its barriers")
        mesh = MESH_NVLS.search(name)
        if mesh and mesh.group(1) == "0" and sm >= 90:
            suffix, reduced = SWITCH.get(mesh.group(2), (None, set()))
            loads = [mm for mm in MULTIMEM.findall(code) if mm.startswith("multimem.ld_reduce")]
            if mesh.group(3) in reduced:
                if not any(mm.endswith(suffix) for mm in loads):
                    errors.append(f"multimem: {name}: no multimem.ld_reduce ending {suffix}")
                if "multimem.st.relaxed.sys.global.v4.f32" not in code:
                    errors.append(f"multimem: {name}: no 16-byte multimem.st")
            elif loads:
                errors.append(f"multimem: {name}: {loads[0]} for an operation the switch does not reduce")
        stores = {"1": "all_gather", "3": "broadcast"}
        if mesh and mesh.group(1) in stores and sm >= 90 and "multimem.st.relaxed.sys.global.v4.f32" not in code:
            errors.append(
                f"multimem: {name}: nvls {stores[mesh.group(1)]} without the switch channel's 16-byte multimem.st")
    return entries, errors


def main(paths):
    if not paths:
        print(__doc__)
        return 2
    total, errors = 0, []
    for p in paths:
        entries, errs = check(p)
        total += len(entries)
        errors += errs
        print(f"{p}: {len(entries)} kernels, {len(errs)} problems")
    for e in errors[:50]:
        print("  " + e)
    if len(errors) > 50:
        print(f"  ... and {len(errors) - 50} more")
    print(f"{total} kernels checked: " + ("OK" if not errors else f"{len(errors)} problems"))
    return 1 if errors else 0


if __name__ == "__main__":
    # CMake passes $<TARGET_OBJECTS:…> as one ';'-separated argument.
    sys.exit(main([p for a in sys.argv[1:] for p in a.split(";") if p]))
