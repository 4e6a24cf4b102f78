"""BFQ's slice_idle and low_latency against CFQ and noop on two devices: xterm's cold-cache start-up time against
the aggregate throughput of ten sequential readers, one point per configuration (mean of the seeds).

    python python/examples/slice_idle_sweep.py [--out docs/python-sweep.png] [--seeds 2] [--backend local|dask]

Writes the plot (PNG) and prints the table behind it.
"""

from __future__ import annotations

import argparse

import bfq

DEVICES = ["seagate-hdd", "plextor-ssd"]
GRID = [
    {"device": DEVICES, "sched": "bfq", "slice_idle": [0, 2, 8], "low_latency": [0, 1]},
    {"device": DEVICES, "sched": ["cfq", "noop"]},
]
COMMON = {"workload": "10r-seq", "app": "xterm"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="docs/python-sweep.png", help="PNG to write")
    ap.add_argument("--seeds", type=int, default=2, help="seeds per configuration")
    ap.add_argument("--backend", default="local", choices=["local", "dask", "ray"])
    args = ap.parse_args()

    grid = [{**g, **COMMON} for g in GRID]
    frame = bfq.sweep(grid, seeds=args.seeds, backend=args.backend)
    # Did not start within 60 s: plotted at the timeout, marked with an x.
    frame["startup"] = frame["startup_s"].fillna(60.0)
    frame["label"] = frame["scheduler"] + frame["tunables"].map(lambda t: f" ({t.replace(';', ', ')})" if t else "")
    table = (
        frame.groupby(["device", "label"], sort=False)
        .agg(startup_s=("startup", "mean"), throughput_mbps=("throughput_mbps", "mean"), timed_out=("timed_out", "any"))
        .reset_index()
    )
    print(table.to_string(index=False))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(DEVICES), figsize=(6.5 * len(DEVICES), 5), constrained_layout=True)
    colours = {"bfq": "tab:blue", "cfq": "tab:orange", "noop": "tab:gray"}
    for ax, device in zip(axes, DEVICES):
        rows = table[table["device"] == device]
        # Configurations that measure the same (to 0.1 MB/s and 10 ms) are one point, labelled with all of them.
        keys = rows.assign(x=rows["throughput_mbps"].round(1), y=rows["startup_s"].round(2))
        for (x, y, timed_out), group in keys.groupby(["x", "y", "timed_out"], sort=False):
            scheds = {label.split(" ")[0] for label in group["label"]}
            colour = colours.get(scheds.pop(), "black") if len(scheds) == 1 else "black"
            ax.scatter(x, y, s=80, color=colour, marker="x" if timed_out else "o", zorder=3)
            ax.annotate("\n".join(group["label"]), (x, y), xytext=(6, 4), textcoords="offset points", fontsize=7)
        ax.set_yscale("log")
        ax.set_title(f"{device}: xterm start-up under 10r-seq")
        ax.set_xlabel("aggregate throughput [MB/s]")
        ax.set_ylabel("start-up time [s] (x: did not start in 60 s)")
        ax.grid(True, which="both", alpha=0.3)
        ax.margins(x=0.35, y=0.25)
    fig.suptitle(f"bfq.sweep: BFQ slice_idle x low_latency vs CFQ and noop (mean of {args.seeds} seed{'s' if args.seeds != 1 else ''} each)")
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
