#!/usr/bin/env python3
"""Per-size min-max over rounds of bench/line_proto_ab.sh's raw output, old against new."""
import re,sys,collections
d=collections.defaultdict(list)  # (spec,build,size)->[times]
lat=collections.defaultdict(list)
cur=None
for line in open(sys.argv[1]):
    m=re.match(r'## round (\d+) (\S+) (\S+) (\S+) line_latency_ns=(\S+)',line)
    if m: cur=(m.group(2)+' '+m.group(3),{'base':'old'}.get(m.group(4),m.group(4))); lat[cur].append(float(m.group(5))); continue
    f=line.split()
    if cur and len(f)>=13 and f[0].isdigit():
        d[(cur[0],cur[1],int(f[0]))].append((float(f[5]),float(f[9]), int(f[8]), int(f[12])))
specs=sorted({k[0] for k in d}, key=lambda s: s)
for s in specs:
    print(f"\n{s}: out of place / in place, µs, min–max over rounds (old → new)")
    print("| size | old out | new out | old in | new in |")
    print("|---:|---|---|---|---|")
    for size in sorted({k[2] for k in d if k[0]==s}):
        b=d[(s,'old',size)]; n=d[(s,'new',size)]
        def r(v,i): xs=[x[i] for x in v]; return f"{min(xs):.2f}–{max(xs):.2f}"
        print(f"| {size} | {r(b,0)} | {r(n,0)} | {r(b,1)} | {r(n,1)} |")
    wrong=sum(x[2]+x[3] for k,v in d.items() if k[0]==s for x in v)
    print(f"wrong elements: {wrong}")
xs=sorted(x for v in lat.values() for x in v)
print(f"\nline latency before the runs: {xs[0]:.0f}-{xs[-1]:.0f} ns, median {xs[len(xs)//2]:.0f}")
