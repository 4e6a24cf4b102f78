#!/usr/bin/env python3
"""Folio sizes of a file's page cache (docs/VALIDATION.md, session 10).

Maps the file privately, reads each resident page's frame number from /proc/self/pagemap and its flags from
/proc/kpageflags (bit 15 compound head, bit 16 compound tail), and counts the folios by size and the physically
contiguous runs (what one bio segment can cover). Needs root. Usage: folios.py FILE [MAX_MIB]
"""
import mmap, os, struct, sys, collections
path = sys.argv[1]
max_mib = int(sys.argv[2]) if len(sys.argv) > 2 else 1 << 20
size = min(os.path.getsize(path), max_mib << 20)
fd = os.open(path, os.O_RDONLY)
m = mmap.mmap(fd, size, access=mmap.ACCESS_COPY)
PAGE = 4096
n = size // PAGE
# Only pages already in the page cache count: mincore says which, and touching those maps them without any I/O.
import ctypes
libc = ctypes.CDLL("libc.so.6", use_errno=True)
vec = (ctypes.c_ubyte * n)()
base = ctypes.addressof(ctypes.c_char.from_buffer(m))
if libc.mincore(ctypes.c_void_p(base), ctypes.c_size_t(size), vec) != 0:
    sys.exit("mincore failed")
resident = [i for i in range(n) if vec[i] & 1]
for i in resident:
    m[i * PAGE]  # map it (resident: no I/O)
pm = open("/proc/self/pagemap", "rb")
kf = open("/proc/kpageflags", "rb")
pfns = {}
for i in resident:
    pm.seek(((base // PAGE) + i) * 8)
    e, = struct.unpack("Q", pm.read(8))
    if e >> 63 & 1:
        pfns[i] = e & ((1 << 55) - 1)
flags = {}
for i, pfn in pfns.items():
    kf.seek(pfn * 8)
    flags[i], = struct.unpack("Q", kf.read(8))
# folios: a head (bit 15) starts one, tails (bit 16) continue; a page with neither is an order-0 folio
sizes = collections.Counter()
cur = None
for i in sorted(flags):
    f = flags[i]
    if f >> 16 & 1 and cur is not None:
        cur += 1
    else:
        if cur is not None:
            sizes[cur] += 1
        cur = 1
if cur is not None:
    sizes[cur] += 1
# physically contiguous runs over file order
runs = 0
prev = None
for i in sorted(pfns):
    if prev is None or pfns[i] != pfns[prev] + 1 or i != prev + 1:
        runs += 1
    prev = i
tot = sum(k * v for k, v in sizes.items())
print(f"{path}: {n} pages mapped, {len(resident)} resident, {len(pfns)} with a PFN")
print("folio size (KiB): count, share of pages")
for k in sorted(sizes):
    print(f"  {k*4:>6}: {sizes[k]:>7}  {100*k*sizes[k]/max(tot,1):5.1f} %")
print(f"physically contiguous runs: {runs}, mean run {4*len(pfns)/max(runs,1):.1f} KiB")
