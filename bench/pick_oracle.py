#!/usr/bin/env python3
"""How well can any fixed choice do on this machine? Judges measured picks, not the model.

  bench/pick_oracle.py RUN.raw.json RUN.raw.json ... (collx-probe --json reports, 3 or more)

For each report held out in turn, the pick at every (collective, ranks, size) is the variant
with the lowest median time over the other reports (only variants measured in all of them);
it counts as right when it is within 10 % of the fastest variant measured in the held-out
report: the probe's pick criterion. The same pick's median time over the other reports is
also taken as its predicted time: its bus bandwidth counts as predicted within 20 % when
|measured / predicted time - 1| <= 0.2 in the held-out report, the probe's second
criterion. Both are also given per (collective, ranks), where the bar asks for 80 % in
every row. Also: the fastest variant of one other report as the pick (every ordered pair).
A model that prices variants from one profile cannot be expected to do better than the
other runs' own measurements do.
"""
import collections
import itertools
import json
import statistics
import sys


def load(path):
    out = {}
    for c in json.load(open(path))['compare']:
        for v in c['variants']:
            for p in v['points']:
                if p[0] > 0 and p[1] > 0:
                    out.setdefault((c['collective'], c['nranks'], p[0]), {})[v['variant']] = p[1]
    return out


def bucket(b):
    return '8 B-4 KiB' if b <= 4096 else ('8-128 KiB' if b < 256 * 1024 else '256 KiB-64 MiB')


def main(paths):
    if len(paths) < 3:
        sys.exit(__doc__)
    runs = [load(p) for p in paths]
    names = [p.rsplit('/', 1)[-1] for p in paths]
    per_bucket = collections.defaultdict(lambda: [0, 0])
    per_row = collections.defaultdict(lambda: [0, 0, 0])  # (coll, P) -> picks right, busbw within 20 %, sizes
    total = [0, 0]
    busbw_total = 0
    print('pick = lowest median time over the other reports, judged on the held-out one (within 10 %)')
    for y, held in enumerate(runs):
        others = [r for i, r in enumerate(runs) if i != y]
        right = n = busbw_right = 0
        for key, measured in held.items():
            times = collections.defaultdict(list)
            for r in others:
                for v, us in r.get(key, {}).items():
                    times[v].append(us)
            cands = {v: statistics.median(t) for v, t in times.items() if v in measured and len(t) == len(others)}
            if not cands:
                continue
            pick = min(cands, key=cands.get)
            ok = measured[pick] <= 1.1 * min(measured.values())
            busbw_ok = abs(measured[pick] / cands[pick] - 1) <= 0.2
            n += 1
            right += ok
            busbw_right += busbw_ok
            row = per_row[key[0], key[1]]
            row[0] += ok
            row[1] += busbw_ok
            row[2] += 1
            per_bucket[bucket(key[2])][0] += ok
            per_bucket[bucket(key[2])][1] += 1
        print(f'  held out {names[y]}: {right} of {n} ({100 * right / n:.0f} %); '
              f'its busbw predicted within 20 % at {busbw_right} ({100 * busbw_right / n:.0f} %)')
        total[0] += right
        total[1] += n
        busbw_total += busbw_right
    print(f'  all: {total[0]} of {total[1]} ({100 * total[0] / total[1]:.0f} %); '
          f'busbw within 20 % at {busbw_total} ({100 * busbw_total / total[1]:.0f} %)')
    for b in ['8 B-4 KiB', '8-128 KiB', '256 KiB-64 MiB']:
        if per_bucket[b][1]:
            k, m = per_bucket[b]
            print(f'    {b}: {k} of {m} ({100 * k / m:.0f} %)')
    print('  per (collective, ranks), over every held-out report: picks within 10 %, busbw within 20 %')
    for (c, P), (k, bb, m) in sorted(per_row.items()):
        print(f'    {c:<15} P={P}: {k} of {m} ({100 * k / m:.0f} %), {bb} ({100 * bb / m:.0f} %)')
    shares = {}
    for x, y in itertools.permutations(range(len(runs)), 2):
        right = n = 0
        for key, measured in runs[y].items():
            c = {v: us for v, us in runs[x].get(key, {}).items() if v in measured}
            if not c:
                continue
            n += 1
            right += measured[min(c, key=c.get)] <= 1.1 * min(measured.values())
        shares[x, y] = (right, n)
    # An upper bound for any predicted time that depends only on (collective,
    # ranks, size, variant), however it was made: at each point the one value
    # that falls within 20 % of the most reports (in sample, so generous), for
    # the variant with the lowest median time over all of them.
    keys = set.intersection(*[set(r) for r in runs])
    best = fits = 0
    for key in keys:
        common = set.intersection(*[set(r[key]) for r in runs])
        if not common:
            continue
        v = min(common, key=lambda x: statistics.median(r[key][x] for r in runs))
        ts = [r[key][v] for r in runs]
        # |t / p - 1| <= 0.2 for p in [t / 1.2, t / 0.8]: try each such bound as p.
        best += max(sum(abs(t / p - 1) <= 0.2 + 1e-12 for t in ts) for p in [t / 1.2 for t in ts] + [t / 0.8 for t in ts])
        fits += len(ts)
    if fits:
        print(f'any fixed predicted time, the best value per point chosen in sample: within 20 % of '
              f'{best} of {fits} measurements ({100 * best / fits:.0f} %)')
    pct = [r / n for r, n in shares.values()]
    print(f'pick = the fastest variant of one other report ({len(pct)} ordered pairs): '
          f'{100 * min(pct):.0f}-{100 * max(pct):.0f} %, mean {100 * sum(pct) / len(pct):.0f} %')
    # Does the machine's state explain the disagreement? Each report's median
    # core-to-core line latency puts it in the near or the far state; a pick
    # taken from a report in the same state should then do better.
    lat = [line_latency(p) for p in paths]
    if all(v is not None for v in lat):
        state = ['far' if v > 3 * min(lat) else 'near' for v in lat]
        print('picks from one report (row) judged on another (column), within 10 %; '
              'line latency median, ns, and state:')
        print('  ' + ' ' * 24 + ''.join(f'{names[y][:10]:>12}' for y in range(len(runs))))
        for x in range(len(runs)):
            cells = ''.join(f'{"-" if x == y else f"{shares[x, y][0]}/{shares[x, y][1]}":>12}'
                            for y in range(len(runs)))
            print(f'  {names[x][:12]:<12} {lat[x]:5.0f} {state[x]:<5}{cells}')
        for same in (True, False):
            sel = [shares[k] for k in shares if (state[k[0]] == state[k[1]]) == same]
            if sel:
                r, n = sum(a for a, _ in sel), sum(b for _, b in sel)
                print(f'  {"same" if same else "different"} state: {r} of {n} ({100 * r / n:.0f} %) '
                      f'over {len(sel)} pairs')


def line_latency(path):
    m = json.load(open(path)).get('measure', {}).get('line_latency_ns', {})
    return m.get('median')


if __name__ == '__main__':
    main(sys.argv[1:])
