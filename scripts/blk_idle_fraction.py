#!/usr/bin/env python3
"""How idle each reader's queue was, from an ftrace `blk` trace (scripts/trace-kernel-startup).

For every thread whose name matches PATTERN (default `bfq-seqreader`), prints the time during the first WINDOW
seconds of the trace (default 0.6, the newest BFQ's delay before a scheduled stable merge is decided) when the thread
had no request inserted and not yet completed, as a share of the time since its first request. That is what the
newest BFQ counts as a queue's idle time (`tot_idle_time`, from a completion that empties the queue to its next
arrival); a queue idle more than a fifth of its window is not I/O bound, and then idling is not deemed to boost
throughput for it, so its scheduled stable merge goes ahead.

Usage: blk_idle_fraction.py TRACE [WINDOW_S] [PATTERN]
"""
import collections
import re
import sys


def main(path, window, pattern):
    ins = re.compile(r"\s(\d+\.\d+):\s+\d+,\d+\s+I\s+\S+\s+(\d+) \+ \d+ \[(" + pattern + r"\d*)\]")
    com = re.compile(r"\s(\d+\.\d+):\s+\d+,\d+\s+C\s+\S+\s+(\d+) \+ \d+")
    owner, inflight, last_end = {}, collections.Counter(), {}
    idle, first, t0 = collections.Counter(), {}, None
    with open(path, errors="replace") as f:
        for line in f:
            m = ins.search(line)
            if m:
                t = float(m.group(1))
                t0 = t if t0 is None else t0
                if t - t0 > window:
                    break
                who = m.group(3)
                owner[m.group(2)] = who
                first.setdefault(who, t)
                if inflight[who] == 0 and who in last_end:
                    idle[who] += t - last_end[who]
                inflight[who] += 1
                continue
            m = com.search(line)
            if m and m.group(2) in owner:
                who = owner.pop(m.group(2))
                inflight[who] -= 1
                if inflight[who] == 0:
                    last_end[who] = float(m.group(1))
    if not first:
        sys.exit(f"no inserted request of a thread named {pattern}* in {path}")
    for who in sorted(first):
        span = t0 + window - first[who]
        print(f"{who}: idle {idle[who]:.3f} s of {span:.3f} s = {100 * idle[who] / span:.0f} %")


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        sys.exit(__doc__)
    main(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 0.6,
         sys.argv[3] if len(sys.argv) > 3 else "bfq-seqreader")
