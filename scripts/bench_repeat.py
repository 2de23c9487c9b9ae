#!/usr/bin/env python3
"""Runs `ordo bench FILTER` several times and summarises the runs.

On a shared machine one run can land in a slow or a fast spell, so a single
run's figure says little about a target. This runs the benchmark program N
times (each run measures ordo and its baselines side by side, as always) and
prints, per (name, impl): the median of the runs' medians, their range, and
the median of each run's own ratios, of the CPU a run reports (cpu_pct)
and of its largest sample (max_ns) where it does. Ratios are never formed
across runs.

With --against OLD, the program OLD (the same benchmarks built from other
code) runs too, alternating with --ordo run by run, and the table compares
the two: per (name, impl) each one's median of run medians and the median
of the per-round ratios new/old (each round runs both back to back, so a
slow spell of the machine weighs on both sides of a ratio).

usage: scripts/bench_repeat.py [--runs N] [--ordo PATH] [--against OLD] FILTER [FILTER ...]
"""
import argparse
import collections
import json
import statistics
import subprocess
import sys


class RunFailed(Exception):
    """A run of the benchmark program that did not end well (its own
    message has gone to stderr already)."""


def run_once(ordo, filt):
    # stderr goes through: ordo says there why a run fails or a benchmark
    # was skipped.
    try:
        out = subprocess.run([ordo, "bench", filt], stdout=subprocess.PIPE, text=True)
    except OSError as e:
        raise RunFailed(f"cannot run {ordo}: {e}") from e
    if out.returncode != 0:
        raise RunFailed(f"`{ordo} bench {filt}` exited {out.returncode}")
    lines = []
    for line in out.stdout.splitlines():
        try:
            lines.append(json.loads(line))
        except json.JSONDecodeError as e:
            print(f"bench_repeat: not a JSON line ({e}): {line}", file=sys.stderr)
    return lines


def positive(text):
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number of runs (1 or more)")
    return value


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=positive, default=5)
    parser.add_argument("--ordo", default="build/bin/ordo")
    parser.add_argument("--against", help="an ordo built from other code, compared side by side")
    parser.add_argument("filters", nargs="+")
    args = parser.parse_args()
    if args.against:
        return compare(args)

    medians = collections.defaultdict(list)
    ratios = collections.defaultdict(lambda: collections.defaultdict(list))
    extras = collections.defaultdict(dict)
    cpu = collections.defaultdict(list)
    maxima = collections.defaultdict(list)
    order = []
    for _ in range(args.runs):
        for filt in args.filters:
            for d in run_once(args.ordo, filt):
                key = (d.get("name"), d.get("impl"))
                if key not in medians and key not in extras:
                    order.append(key)
                if "median_ns" in d:
                    # null where a run had no figure (a ratio to a zero median)
                    runs = medians[key]
                    if d["median_ns"] is not None:
                        runs.append(d["median_ns"])
                    if d.get("cpu_pct") is not None:
                        cpu[key].append(d["cpu_pct"])
                    if d.get("max_ns") is not None:
                        maxima[key].append(d["max_ns"])
                    for base, r in d.get("ratio_to", {}).items():
                        if r is not None:
                            ratios[key][base].append(r)
                else:
                    extras[key] = {k: v for k, v in d.items() if k not in ("name", "impl")}

    print(f"| name | impl | median of {args.runs} run medians, ns | range, ns "
          "| median of the runs' ratios (range) |")
    print("|---|---|---|---|---|")
    for key in order:
        if key in medians:
            v = medians[key]
            if not v:
                print(f"| {key[0]} | {key[1]} | | | no figure in any run |")
                continue
            r = "; ".join(
                f"{base}: {statistics.median(x):.3f} ({min(x):.3f}-{max(x):.3f})"
                for base, x in ratios[key].items())
            if cpu[key]:
                c = cpu[key]
                r += ("; " if r else "") + (f"cpu_pct: {statistics.median(c):.1f} "
                                            f"({min(c):.1f}-{max(c):.1f})")
            if maxima[key]:
                m = maxima[key]
                r += ("; " if r else "") + (f"max_ns: {statistics.median(m):.1f} "
                                            f"({min(m):.1f}-{max(m):.1f})")
            print(f"| {key[0]} | {key[1]} | {statistics.median(v):.1f} | "
                  f"{min(v):.1f}-{max(v):.1f} | {r} |")
        else:
            fields = ", ".join(f"{k} {v}" for k, v in extras[key].items())
            print(f"| {key[0]} | {key[1]} | | | {fields} (last run) |")
    return 0


def compare(args):
    """Alternates the two programs round by round; ratios are new/old per round."""
    medians = {"new": collections.defaultdict(list), "old": collections.defaultdict(list)}
    per_round = collections.defaultdict(list)
    order = []
    for i in range(args.runs):
        for filt in args.filters:
            # Alternate which goes first, so neither always runs on a warmer machine.
            sides = [("new", args.ordo), ("old", args.against)]
            if i % 2:
                sides.reverse()
            this_round = collections.defaultdict(dict)
            for side, program in sides:
                for d in run_once(program, filt):
                    if d.get("median_ns") is None:
                        continue
                    key = (d.get("name"), d.get("impl"))
                    if key not in order:
                        order.append(key)
                    medians[side][key].append(d["median_ns"])
                    this_round[key][side] = d["median_ns"]
            for key, both in this_round.items():
                if both.get("old") and "new" in both:
                    per_round[key].append(both["new"] / both["old"])
    print(f"| name | impl | new, median of {args.runs} runs, ns | old, ns "
          "| new/old: median of the rounds' ratios (range) |")
    print("|---|---|---|---|---|")

    def median_of(side, key):
        runs = medians[side].get(key)
        return f"{statistics.median(runs):.1f}" if runs else ""

    for key in order:
        r = per_round.get(key)
        cell = f"{statistics.median(r):.3f} ({min(r):.3f}-{max(r):.3f})" if r else ""
        print(f"| {key[0]} | {key[1]} | {median_of('new', key)} | {median_of('old', key)} | {cell} |")
    return 0

if __name__ == "__main__":
    try:
        sys.exit(main())
    except RunFailed as e:
        print(f"bench_repeat: {e}; nothing summarised", file=sys.stderr)
        sys.exit(1)
