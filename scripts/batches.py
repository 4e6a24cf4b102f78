"""Reads a trace of scripts/vda_trace.bt and shows how vda serves the loop device's reads during an application's
start-up (docs/VALIDATION.md, session 11).

Usage: batches.py TRACE APP_TASK [MS]. APP_TASK is the task name of the application's reads on loop0 (the kernel
target's replay thread, e.g. bfq-xterm). Prints vda's reads in flight every 0.5 ms for the first MS ms (default
30) of the start-up, then, for the application's reads, the median latency at loop0 split by whether vda had
reads in flight when the application's read was issued to it.
"""
import statistics as st
import sys


def intervals(path):
    """(dev, rwbs, issue ns, completion ns, sectors, task) per request, pairing D and C by device and sector."""
    ev = []
    for line in open(path):
        p = line.split()
        if len(p) < 7 or p[1] not in "DC":
            continue
        ev.append((int(p[0]), p[1], int(p[2]), p[3], int(p[4]), int(p[5]), p[6]))
    ev.sort()
    open_, out = {}, []
    for t, k, dev, rw, sec, n, x in ev:
        if k == "D":
            open_[(dev, sec)] = (t, rw, n, x)
        elif (dev, sec) in open_:
            t0, rw0, n0, x0 = open_.pop((dev, sec))
            out.append((dev, rw0, t0, t, n0, x0))
    return out


def main():
    path, task = sys.argv[1], sys.argv[2]
    ms = float(sys.argv[3]) if len(sys.argv) > 3 else 30.0
    iv = intervals(path)
    app = [v for v in iv if v[0] == 7 and v[5] == task]
    if not app:
        sys.exit(f"no reads of task {task} on loop0 in {path}")
    vda = [v for v in iv if v[0] == 254 and "R" in v[1]]
    t0, t1 = min(v[2] for v in app), max(v[3] for v in app)

    def in_flight(t):
        return sum(1 for v in vda if v[2] < t < v[3])

    t = t0
    while t < t0 + ms * 1e6:
        n = in_flight(t)
        print(f"{(t - t0) / 1e6:7.1f} ms  vda reads in flight {n:3d} " + "#" * n)
        t += 500_000
    fast, slow = [], []
    for a in app:
        # The application's request on vda: the first vda read of the same size issued after it on loop0.
        c = [v for v in vda if v[4] == a[4] and a[2] <= v[2] <= a[3]]
        if not c:
            continue
        v = min(c, key=lambda v: v[2])
        (slow if in_flight(v[2]) > 0 else fast).append((a[3] - a[2]) / 1e3)
    span = (t1 - t0) / 1e9
    mb = sum(v[4] for v in vda if t0 <= v[3] <= t1) * 512 / 1e6
    print(f"start-up {span:.3f} s; vda read {mb / span:.0f} MB/s; {len(app)} application reads")
    for name, g in (("vda empty", fast), ("vda busy", slow)):
        if g:
            print(f"  issued to vda while {name}: {len(g)} reads, median latency at loop0 {st.median(g):.0f} us")


if __name__ == "__main__":
    main()
