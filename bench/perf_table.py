"""Reads the tables collx-perf prints (nccl-tests' columns), for the bench/run_*.sh reports."""


def table_rows(path):
    """size -> the fields of its row: 0 size, 1 count, 2 type, 3 redop, 4 root, then per block
    (out of place 5-8, in place 9-12) time (us), algbw, busbw, #wrong."""
    rows = {}
    for line in open(path):
        p = line.split()
        if line.startswith("#") or len(p) < 13:
            continue
        rows[int(p[0])] = p
    return rows
