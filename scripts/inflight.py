"""Samples a block device's requests in flight (/sys/block/DEV/inflight: reads, writes) every millisecond.

Usage: inflight.py DEV OUT STOPFILE. Writes "seconds reads writes" lines to OUT until STOPFILE exists
(docs/VALIDATION.md, session 10).
"""
import sys, time
dev = sys.argv[1]; out = open(sys.argv[2], 'w'); stop = sys.argv[3]
import os
t0 = time.monotonic()
while not os.path.exists(stop):
    with open(f'/sys/block/{dev}/inflight') as f:
        r, w = f.read().split()
    out.write(f"{time.monotonic()-t0:.4f} {r} {w}\n")
    time.sleep(0.001)
