#!/usr/bin/env bash
# bench/lowp_ptx.sh REV [ARCH] — PTX instructions, and ptxas's stack frame
# and registers, of the narrow-float reduce_copy kernels
# (bench/lowp_kernels.cu), compiled against the headers of git revision REV
# and against the working tree's, for sm_ARCH (default 90). No GPU needed: a
# static count of what the compilers emit, not a timing.
usage="bench/lowp_ptx.sh REV [ARCH]"
source "$(dirname "${BASH_SOURCE[0]}")/rev_headers.sh"
"$nvcc" -std=c++20 -I"$tmp/include" -arch=sm_"$arch" -ptx bench/lowp_kernels.cu -o "$tmp/old.ptx"
"$nvcc" -std=c++20 -Iinclude -arch=sm_"$arch" -ptx bench/lowp_kernels.cu -o "$tmp/new.ptx"
ptxas=$(dirname "$nvcc")/ptxas
"$ptxas" -arch=sm_"$arch" -v "$tmp/old.ptx" -o /dev/null 2>"$tmp/old.v"
"$ptxas" -arch=sm_"$arch" -v "$tmp/new.ptx" -o /dev/null 2>"$tmp/new.v"
/usr/bin/python3 - "$tmp/old.ptx" "$tmp/new.ptx" "$rev" "$arch" "$tmp/old.v" "$tmp/new.v" <<'PY'
import re, sys

def resources(path):
    """kernel -> (stack frame bytes, registers) from ptxas -v."""
    out, cur = {}, None
    for line in open(path):
        m = re.search(r"Compiling entry function '(\S+)'", line)
        if m:
            cur = m.group(1)
            out[cur] = [0, 0]
        m = re.search(r"(\d+) bytes stack frame", line)
        if m and cur:
            out[cur][0] = int(m.group(1))
        m = re.search(r"Used (\d+) registers", line)
        if m and cur:
            out[cur][1] = int(m.group(1))
    return out

def count(path):
    out, cur, depth = {}, None, 0
    for line in open(path):
        m = re.match(r'^\s*(?:\.visible\s+)?\.entry\s+(\S+?)\(', line)
        if m:
            cur = m.group(1)
            out[cur] = 0
            continue
        if cur is None:
            continue
        depth += line.count('{') - line.count('}')
        s = line.strip()
        if s.endswith(';') and not s.startswith(('.', '//')):
            out[cur] += 1
        if depth == 0 and '}' in line:
            cur = None
    return out

old, new = count(sys.argv[1]), count(sys.argv[2])
old_r, new_r = resources(sys.argv[5]), resources(sys.argv[6])
ops = {'0': 'sum', '1': 'prod', '2': 'min', '3': 'max', '4': 'avg'}
print(f"PTX instructions per kernel, sm_{sys.argv[4]}: headers of {sys.argv[3]} -> working tree")
print(f"| type | op | {sys.argv[3]} | working tree | ratio | stack frame B | registers |")
print("|---|---|---:|---:|---:|---|---|")
types = {'6half_t': 'half', '10bfloat16_t': 'bfloat16', '13float8_e4m3_t': 'e4m3', '13float8_e5m2_t': 'e5m2',
         'If': 'float'}
for k, v in old.items():
    t = next((name for tag, name in types.items() if tag in k), k)
    m = re.search(r'9reduce_opE(\d)E', k)
    n = new.get(k, 0)
    (fo, ro), (fn, rn) = old_r.get(k, (0, 0)), new_r.get(k, (0, 0))
    print(f"| {t} | {ops.get(m.group(1), '?') if m else '?'} | {v} | {n} | {n / v:.2f} | {fo} → {fn} | {ro} → {rn} |")
PY
