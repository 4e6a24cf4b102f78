#!/usr/bin/env python3
"""Summarises an ftrace `blk` trace of one kernel-target start-up (scripts/trace-kernel-startup).

Prints, for the application's thread (`bfq-xterm`): its start-up span (first queued request to last completion),
how often BFQ confirmed the application's queue as the *waker* of another queue ("set waker bfq<pid>S"), how many
requests of other queues were dispatched while the application's queue was in service (BFQ injecting them), the
median number of other requests in the device when an application request was dispatched, and the median
queue-to-completion time of the application's requests.
"""
import re
import sys

def main(path):
    lines = open(path, errors="replace").read().splitlines()
    app = next((m.group(1) for l in lines for m in [re.search(r"bfq-xterm-(\d+)", l)] if m), None)
    if app is None:
        sys.exit("no bfq-xterm thread in the trace")
    rq = re.compile(r"\s(\d+\.\d+):\s+\d+,\d+\s+(\w+)\s+(\w+)\s+(\d+) \+ (\d+) ")
    svc = re.compile(r"\s(\d+\.\d+):.* N (bfq\S+) set_in_service_queue")
    # First pass: the application's requests and its window (first queued to last completion).
    appq, first, last = set(), None, None
    for l in lines:
        m = rq.search(l) if " m " not in l else None
        if m and m.group(2) == "Q" and "[bfq-xterm]" in l:
            appq.add((m.group(4), m.group(5)))
            first = first if first is not None else float(m.group(1))
        elif m and m.group(2) == "C" and (m.group(4), m.group(5)) in appq:
            last = float(m.group(1))
    queued, inflight = {}, {}
    in_service, lat, depth, injected, wakers = None, [], [], 0, 0
    for l in lines:
        if " m " in l:
            m = svc.search(l)
            if m:
                in_service = m.group(2)
            if f"set waker bfq{app}S" in l:
                wakers += 1
            continue
        m = rq.search(l)
        if not m:
            continue
        t, act, _, sec, n = m.groups()
        t, key = float(t), (sec, n)
        if act == "Q" and "[bfq-xterm]" in l:
            queued[key] = t
        elif act == "D":
            if key in appq:
                depth.append(sum(1 for k in inflight if k not in appq))
            elif first <= t <= last and in_service == f"bfq{app}S":
                injected += 1
            inflight[key] = t
        elif act == "C":
            inflight.pop(key, None)
            if key in queued:
                lat.append(t - queued.pop(key))
    med = lambda x: sorted(x)[len(x) // 2] if x else float("nan")
    span = last - first
    print(f"app pid {app}: span {span:.3f} s, {len(lat)} requests, waker confirmations {wakers}, "
          f"other requests dispatched while the app's queue was in service {injected}, "
          f"median other requests in the device at an app dispatch {med(depth)}, "
          f"median app queue-to-completion {1e3 * med(lat):.2f} ms")

if __name__ == "__main__":
    main(sys.argv[1])
