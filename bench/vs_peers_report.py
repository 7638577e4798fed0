#!/usr/bin/env python3
"""bench/vs_peers_report.py — the report of bench/run_vs_peers.sh.

    python3 bench/vs_peers_report.py RUNDIR OUTBASE

RUNDIR holds meta.txt (KEY=value lines, LIB=tag|label|command per library)
and TAG.REP.out / TAG.REP.err per run. Writes OUTBASE.md (tables, ratios,
targets), OUTBASE.svg (busbw vs size, log-log) and OUTBASE.raw.txt (every
output). Exit status 1 when a run reported wrong results. Python 3 standard
library only.
"""
import glob
import math
import os
import re
import statistics
import sys

KIB, MIB = 1 << 10, 1 << 20
PEERS = ("ompi", "mpich", "gloo-ring", "gloo-hd")  # candidates for "best peer"
COLORS = {"collx": "#d62728", "collx-also": "#ff7f0e", "ompi": "#1f77b4", "mpich": "#2ca02c", "gloo-ring": "#9467bd",
          "gloo-hd": "#8c564b", "copy": "#7f7f7f"}


def read_meta(path):
    meta, libs, multi = {}, [], {"SKIPPED": [], "FAILED": []}
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if "=" not in line:
                continue
            k, v = line.split("=", 1)
            if k == "LIB":
                tag, label, cmd = v.split("|", 2)
                libs.append((tag, label, cmd.strip()))
            elif k in multi:
                multi[k].append(v)
            else:
                meta[k] = v
    return meta, libs, multi


def parse_table(path):
    """size -> [(time_us, busbw, wrong) out of place, the same in place or None]"""
    rows = {}
    try:
        f = open(path)
    except OSError:
        return rows
    with f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            p = line.split()
            if len(p) < 13:
                continue
            try:
                size = int(p[0])
                blocks = []
                for t, bw, w in ((p[5], p[7], p[8]), (p[9], p[11], p[12])):
                    blocks.append(None if w == "N/A" and float(t) == 0 else (float(t), float(bw), w))
            except ValueError:
                continue
            rows[size] = blocks
    return rows


def busbw_factor(coll, P):
    if coll == "all_reduce":
        return 2 * (P - 1) / P
    if coll in ("all_gather", "reduce_scatter", "all_to_all", "all_to_allv"):
        return (P - 1) / P
    return 1.0


def human(b):
    for unit, div in (("GiB", 1 << 30), ("MiB", MIB), ("KiB", KIB)):
        if b >= div:
            return f"{b / div:g} {unit}"
    return f"{b} B"


def fmt_t(us):
    if us is None:
        return "—"
    return f"{us:.0f}" if us >= 10000 else f"{us:.1f}" if us >= 100 else f"{us:.2f}" if us >= 0.1 else f"{us:.4f}"


def fmt_bw(gbs):
    if gbs is None:
        return "—"
    return f"{gbs:.3f}" if gbs < 10 else f"{gbs:.2f}"


def fmt_r(r):
    return "—" if r is None or math.isnan(r) else f"{r:.2f}"


def main():
    rundir, outbase = sys.argv[1], sys.argv[2]
    meta, libs, multi = read_meta(os.path.join(rundir, "meta.txt"))
    coll, P = meta["COLL"], int(meta["PROCS"])
    oversub = meta["OVERSUB"] == "1"
    hog = meta.get("HOG") == "1"
    reps = int(meta["REPEATS"])
    factor = busbw_factor(coll, P)
    tags = [t for t, _, _ in libs]
    label = {t: l for t, l, _ in libs}
    runs = {t: [parse_table(os.path.join(rundir, f"{t}.{r}.out")) for r in range(1, reps + 1)] for t in tags}
    sizes = sorted({s for t in tags for r in runs[t] for s in r})

    # Medians over the repeats of the time per (library, placement, size); busbw
    # from the median time (size / time x the bus factor), so small sizes keep
    # their ratios despite the table's two decimals. The copy's times of small
    # sizes are below the time column's resolution: its median is taken of the
    # busbw column (copy-bench times them long enough) and the time derived.
    med = {}
    wrong = []
    for t in tags:
        for pl in (0, 1):
            for s in sizes:
                bs = [r[s][pl] for r in runs[t] if s in r and r[s][pl] is not None]
                if not bs:
                    continue
                if t == "copy":
                    bw = statistics.median(b[1] for b in bs)
                    if bw > 0:
                        med[(t, pl, s)] = s / bw / 1e3
                else:
                    med[(t, pl, s)] = statistics.median(b[0] for b in bs)
        for i, r in enumerate(runs[t], 1):
            for s, blocks in r.items():
                for pl, b in enumerate(blocks):
                    if b is not None and b[2] not in ("0", "N/A"):
                        wrong.append(f"{label[t]} repeat {i}, {human(s)} {'in place' if pl else 'out of place'}: {b[2]}")

    def t_of(t, pl, s):
        return med.get((t, pl, s))

    def bw_of(t, pl, s):
        tm = t_of(t, pl, s)
        if tm is None or tm <= 0:
            return None
        return s / tm / 1e3 * (1.0 if t == "copy" else factor)

    peers = [t for t in tags if t in PEERS]

    def best_peer(pl, s):
        cands = [(t_of(t, pl, s), t) for t in peers if t_of(t, pl, s)]
        return min(cands)[1] if cands else None

    placements = [0, 1] if any(t_of("collx", 1, s) for s in sizes) else [0]
    pl_name = {0: "out of place", 1: "in place"}

    # ---- tables: times with the latency ratio, busbw with the busbw ratio ----
    def tables(pl):
        cols = [t for t in tags if pl == 0 or t != "copy"]
        libs_ = [t for t in cols if t != "copy"]
        th = ["size"] + [label[t] for t in libs_] + ["best peer", "latency collx/best"]
        bh = ["size"] + [label[t] + (" (ceiling)" if t == "copy" else "") for t in cols] + ["busbw collx/best"]
        tt = ["Time (us):", "", "| " + " | ".join(th) + " |", "|" + "---:|" * len(th)]
        bt_ = ["Bus bandwidth (GB/s):", "", "| " + " | ".join(bh) + " |", "|" + "---:|" * len(bh)]
        for s in sizes:
            b = best_peer(pl, s)
            ct, bt = t_of("collx", pl, s), (t_of(b, pl, s) if b else None)
            bw_ratio = bt / ct if ct and bt else None
            lat_ratio = ct / bt if ct and bt else None
            tt.append("| " + " | ".join([human(s)] + [fmt_t(t_of(t, pl, s)) for t in libs_]
                                        + [label[b] if b else "—", fmt_r(lat_ratio)]) + " |")
            bt_.append("| " + " | ".join([human(s)] + [fmt_bw(bw_of(t, pl, s)) for t in cols]
                                         + [fmt_r(bw_ratio)]) + " |")
        return tt + [""] + bt_

    # ---- targets ----
    def ratio_all(pl, peer, lo, hi, need, what):
        """collx busbw >= need x peer's at every size in [lo, hi]."""
        tags_ = [peer] if isinstance(peer, str) else list(peer)
        tags_ = [t for t in tags_ if t in tags]
        name = " / ".join(label[t] for t in tags_) if tags_ else (peer if isinstance(peer, str) else "/".join(peer))
        ss = [s for s in sizes if lo <= s <= hi]
        if not tags_:
            return f"- {what}: n/a ({name} not run)"
        pts = []
        for s in ss:
            ct = t_of("collx", pl, s)
            pts_t = [t_of(t, pl, s) for t in tags_ if t_of(t, pl, s)]
            if ct and pts_t:
                pts.append((min(pts_t) / ct, s))  # vs the fastest of the given peers
        if not pts:
            return f"- {what}: n/a (no size of the sweep in range)"
        bad = [(r, s) for r, s in pts if r < need]
        worst = min(pts)
        verdict = "MET" if not bad else "NOT MET"
        detail = f"lowest {worst[0]:.2f}x at {human(worst[1])}, {len(pts)} sizes"
        if bad:
            detail += "; short at " + ", ".join(f"{human(s)} ({r:.2f}x)" for r, s in bad)
        return f"- **{what}: {verdict}** ({detail})"

    def latency_le(pl, peer, ss, slack, what):
        if peer not in tags:
            return f"- {what}: n/a ({peer} not run)"
        pts = [(t_of("collx", pl, s) / t_of(peer, pl, s), s) for s in ss
               if s in sizes and t_of("collx", pl, s) and t_of(peer, pl, s)]
        if not pts:
            return f"- {what}: n/a (sizes not in the sweep)"
        bad = [(r, s) for r, s in pts if r > slack]
        verdict = "MET" if not bad else "NOT MET"
        parts = ", ".join(f"{human(s)}: collx {fmt_t(t_of('collx', pl, s))} us vs {fmt_t(t_of(peer, pl, s))} us "
                          f"({r:.2f}x)" for r, s in pts) if len(pts) <= 3 else (
            f"worst {max(pts)[0]:.2f}x at {human(max(pts)[1])}, {len(pts)} sizes")
        return f"- **{what}: {verdict}** ({parts})"

    def copy_share(pl, s, share, what):
        if "copy" not in tags:
            return f"- {what}: n/a (copy-bench not run)"
        cb, cp = bw_of("collx", pl, s), bw_of("copy", 0, s)
        if cb is None or cp is None:
            return f"- {what}: n/a ({human(s)} not in the sweep)"
        verdict = "MET" if cb >= share * cp else "NOT MET"
        return (f"- **{what}: {verdict}** (collx busbw {cb:.2f} GB/s, copy {cp:.2f} GB/s: "
                f"{100 * cb / cp:.0f}%)")

    def targets(pl):
        out = []
        if hog:
            out.append(ratio_all(pl, "ompi", 256 * KIB, 64 * MIB, 1.0,
                                 "under load: busbw >= Open MPI at every size 256 KiB-64 MiB"))
            out.append(latency_le(pl, "ompi", [s for s in sizes if s <= 4 * KIB], 1.2,
                                  "under load: latency <= 1.2x Open MPI at every size up to 4 KiB"))
            return out
        if coll == "all_reduce":
            if not oversub:
                out.append(ratio_all(pl, "ompi", 256 * KIB, 64 * MIB, 1.5, "busbw >= 1.5x Open MPI at every size 256 KiB-64 MiB"))
                out.append(ratio_all(pl, "mpich", 256 * KIB, 64 * MIB, 2.0, "busbw >= 2x MPICH at every size 256 KiB-64 MiB"))
                out.append(copy_share(pl, 16 * MIB, 0.6, "busbw >= 60% of single-thread copy bandwidth at 16 MiB"))
                out.append(latency_le(pl, "ompi", [8, 4 * KIB], 1.0, "latency at 8 B and 4 KiB <= Open MPI"))
            else:
                out.append(latency_le(pl, "ompi", [8], 1.0, f"{P} procs oversubscribed: 8 B latency <= Open MPI"))
                out.append(latency_le(pl, "ompi", sizes, 1.1,
                                      f"{P} procs oversubscribed: no size slower than Open MPI by > 10%"))
            out.append(ratio_all(pl, ("gloo-ring", "gloo-hd"), 0, 1 << 62, 3.0,
                                 "busbw >= 3x Gloo (the faster of ring_chunked and halving_doubling) at every size"))
        else:
            out.append(ratio_all(pl, "ompi", 256 * KIB, 64 * MIB, 1.5,
                                 f"{coll} busbw >= 1.5x Open MPI at every size 256 KiB-64 MiB"))
            out.append(latency_le(pl, "ompi", [s for s in sizes if s < 256 * KIB], 1.0,
                                  f"{coll} latency <= Open MPI at every size below 256 KiB"))
        return out

    # ---- plot ----
    svg_path = outbase + ".svg"
    write_svg(svg_path, coll, P, oversub, sizes, tags, label, lambda t, s: bw_of(t, 0, s))

    md = [f"# {coll}, {P} processes{' (oversubscribed)' if oversub else ''}{', one busy loop per CPU' if hog else ''}: "
          "collx vs Open MPI, MPICH, Gloo", ""]
    md += [f"Generated by `bench/run_vs_peers.sh` from {meta['START']} to {meta['END']}.", ""]
    md += ["## Machine", "",
           f"- CPU: {meta['CPU']}",
           f"- Memory: {meta['MEM']}; kernel {meta['KERNEL']}; {meta['OS']}",
           f"- Load average (1/5/15 min) at start: {meta['LOAD_START']}; at end: {meta['LOAD_END']}"
           + (" (measured while the busy loops ran)" if hog else ""),
           *(["- **Loaded machine:** one busy loop per CPU (`bench/hog.sh`) ran through every run."] if hog else []),
           f"- Open MPI: {meta['OMPI']}",
           f"- MPICH: {meta['MPICH']}",
           f"- Gloo: {meta['GLOO']}",
           f"- Compiler: {meta['CXX']}",
           f"- collx commit: `{meta['COMMIT']}`", ""]
    md += ["## Method", "",
           f"`{meta['INVOCATION']}`", "",
           f"- {reps} repeat{'s' if reps > 1 else ''}; every repeat runs each library once, the order rotated by one per repeat; "
           "each value below is the median over the repeats.",
           f"- Every tool: fp32 sum, sizes factor 2, per size one checked call (#wrong against an independently "
           f"computed reference, tools/perf_common.hpp), {meta['WARMUP']} warm-up calls, then "
           + (f"the median of {meta['ITERS']} calls each timed alone (`-t median`)"
              if meta.get("TIMING") == "median" else f"the mean of {meta['ITERS']} timed calls")
           + (" (before each, every rank stores to each line of its input, then a barrier: "
              "`--rewrite-input`, fresh data)" if meta.get("REWRITE_INPUT") == "1" else "")
           + ", the maximum over ranks; out of place, then in place.",
           f"- busbw = size / time x {factor:g} (nccl-tests' factor for {coll}, P = {P}), computed from the median times; "
           "the copy's is size / time.",
           f"- Environment of every run: `{meta['PEER_ENV'] or '(none)'}`.",
           "- Open MPI: vader (shared memory) BTL with CMA single copy, "
           + ("`--oversubscribe` (no binding; Open MPI yields when idle)" if oversub else "`--bind-to core`")
           + "; MPICH: " + ("no binding" if oversub else "`-bind-to core`")
           + "; collx-perf's launcher pins rank r to CPU r when the ranks fit (none otherwise); "
           "gloo-bench does the same; copy-bench runs one thread on the first CPU.",
           "- Gloo's algorithms reduce in place: its out-of-place time includes copying the input into the output buffer.",
           "- Ratios: busbw collx/best > 1 and latency collx/best < 1 favour collx; best = the fastest peer at that size "
           "(not the copy).", ""]
    md += ["Commands:", ""] + [f"- {l}: `{c}`" for _, l, c in libs] + [""]
    if multi["SKIPPED"]:
        md += ["Not run: " + "; ".join(multi["SKIPPED"]) + ".", ""]
    md += ["## Targets", ""]
    for pl in placements:
        md += [f"{pl_name[pl].capitalize()}:", ""] + targets(pl) + [""]
    if multi["FAILED"]:
        md += ["**Failed runs:** " + "; ".join(multi["FAILED"]), ""]
    if wrong:
        md += ["**Wrong results reported:** " + "; ".join(wrong), ""]
    elif not multi["FAILED"]:
        md += ["All results checked: 0 wrong elements in every run.", ""]
    md += ["## Results", "", f"![busbw vs size]({os.path.basename(svg_path)})", ""]
    for pl in placements:
        md += [f"### {pl_name[pl].capitalize()} (medians over {reps} repeat{'s' if reps > 1 else ''})", ""]
        md += tables(pl) + [""]
    md += [f"Every run's output: [{os.path.basename(outbase)}.raw.txt]({os.path.basename(outbase)}.raw.txt).", ""]
    with open(outbase + ".md", "w") as f:
        f.write("\n".join(md))

    with open(outbase + ".raw.txt", "w") as f:
        for r in range(1, reps + 1):
            for t, l, c in libs:
                f.write(f"==> {l}, repeat {r}: {c}\n")
                for ext in ("out", "err"):
                    p = os.path.join(rundir, f"{t}.{r}.{ext}")
                    if os.path.exists(p):
                        text = open(p, errors="replace").read().rstrip()
                        if text:
                            f.write(("" if ext == "out" else "[stderr]\n") + text + "\n")
                f.write("\n")

    print(f"wrote {outbase}.md, {outbase}.svg, {outbase}.raw.txt")
    for pl in placements:
        print(f"{pl_name[pl]}:")
        print("\n".join(targets(pl)))
    return 1 if wrong else 0


def write_svg(path, coll, P, oversub, sizes, tags, label, bw):
    """busbw vs size, log-log, one polyline per library (the copy dashed)."""
    W, H, L, R, T, B = 860, 520, 70, 240, 40, 50
    series = {t: [(s, bw(t, s)) for s in sizes if bw(t, s)] for t in tags}
    vals = [v for pts in series.values() for _, v in pts if v > 0]
    if not vals or not sizes:
        open(path, "w").write('<svg xmlns="http://www.w3.org/2000/svg" width="200" height="40"><text x="5" y="25">no data</text></svg>\n')
        return
    x0, x1 = math.log10(min(sizes)), math.log10(max(sizes))
    if x1 == x0:
        x1 = x0 + 1
    y0, y1 = math.floor(math.log10(min(vals))), math.ceil(math.log10(max(vals)))
    if y1 == y0:
        y1 = y0 + 1

    def X(s):
        return L + (math.log10(s) - x0) / (x1 - x0) * (W - L - R)

    def Y(v):
        return H - B - (math.log10(v) - y0) / (y1 - y0) * (H - T - B)

    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
         'font-family="sans-serif" font-size="12">',
         f'<rect width="{W}" height="{H}" fill="white"/>',
         f'<text x="{L}" y="22" font-size="14">{coll}, {P} processes{" (oversubscribed)" if oversub else ""}: '
         'busbw vs size (out of place, medians)</text>']
    for e in range(y0, y1 + 1):  # decades of GB/s
        y = Y(10 ** e)
        o.append(f'<line x1="{L}" y1="{y:.1f}" x2="{W - R}" y2="{y:.1f}" stroke="#ddd"/>')
        o.append(f'<text x="{L - 6}" y="{y + 4:.1f}" text-anchor="end">{10 ** e:g}</text>')
    s = 1
    while s <= max(sizes):  # every 4x in size
        if s >= min(sizes):
            x = X(s)
            o.append(f'<line x1="{x:.1f}" y1="{T}" x2="{x:.1f}" y2="{H - B}" stroke="#eee"/>')
            o.append(f'<text x="{x:.1f}" y="{H - B + 16}" text-anchor="middle">{human(s).replace(" ", "")}</text>')
        s *= 4
    o.append(f'<rect x="{L}" y="{T}" width="{W - L - R}" height="{H - T - B}" fill="none" stroke="#444"/>')
    o.append(f'<text x="{(L + W - R) / 2:.0f}" y="{H - 12}" text-anchor="middle">size (bytes per rank)</text>')
    o.append(f'<text x="16" y="{(T + H - B) / 2:.0f}" text-anchor="middle" '
             f'transform="rotate(-90 16 {(T + H - B) / 2:.0f})">busbw (GB/s)</text>')
    for i, t in enumerate(tags):
        pts = series[t]
        if not pts:
            continue
        color = COLORS.get(t, "#000")
        dash = ' stroke-dasharray="6,4"' if t == "copy" else ""
        width = 2.5 if t == "collx" else 1.6
        path_pts = " ".join(f"{X(s):.1f},{Y(v):.1f}" for s, v in pts)
        o.append(f'<polyline points="{path_pts}" fill="none" stroke="{color}" stroke-width="{width}"{dash}/>')
        ly = T + 14 + 18 * i
        o.append(f'<line x1="{W - R + 12}" y1="{ly - 4}" x2="{W - R + 36}" y2="{ly - 4}" stroke="{color}" '
                 f'stroke-width="{width}"{dash}/>')
        name = label[t] + (" (ceiling)" if t == "copy" else "")
        o.append(f'<text x="{W - R + 42}" y="{ly}">{name}</text>')
    o.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(o) + "\n")


if __name__ == "__main__":
    sys.exit(main())
