#!/usr/bin/env python3
"""The house in figures (issue 25): what the code's shape looks like, measured, not judged.

  scripts/house.py [--build DIR] [--json]

Prints, over src/ (tests and fuzz targets left out where they would only add noise):
  - ownership per layer: cleanup-attribute declarations against manual releases (free, close,
    json_decref, curl_easy_cleanup, ...);
  - functions over 80 lines (goal: none outside tests) and files over 800 lines;
  - include edges that point up or across the layers (goal: none);
  - file-level cycles: .c files that call each other in a ring, read off the object files'
    defined and undefined symbols (needs --build with a finished build; without one, says so);
  - duplicate pairs: runs of 6 or more lines that stand in two places, the same or of the same
    shape with other names, strings and numbers.
Exit status 0 always: these are figures for a person, printed by `make check`; no goal fails it.
Standard library only."""
import argparse
import collections
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "src")

# Lower rank = lower layer. An include from a file to a folder of higher rank points up; to
# another folder of the same rank (two providers, cli and server) it points across. card (the run
# card library) sits on lib's types and under both cli and server, which print it.
RANK = {"core": 0, "wire": 1, "guestio": 2, "broker": 2, "module": 2, "jsrt": 2, "confine": 1, "providers": 3,
        "server": 4, "cli": 4, "daemon": 5, "lib": 3, "card": 3.5}
RELEASES = re.compile(r"\b(free|close|json_decref|curl_easy_cleanup|curl_slist_free_all|seccomp_release|"
                      r"fclose|closedir|munmap)\s*\(")
ATTR = r"__attribute__\s*\(\(\s*cleanup\s*\("


def cleanup_pattern(files):
    """Declarations with a cleanup attribute: written out, or through a macro that stands for one
    (core/cleanup.h's cleanup_free, a file's own cleanup_run, ...)."""
    names = set()
    for f in files:
        with open(f, encoding="utf-8", errors="replace") as fh:
            names |= set(re.findall(r"#\s*define\s+([A-Za-z_][A-Za-z0-9_]*)(?:\([^)]*\))?\s+" + ATTR, fh.read()))
    alts = [ATTR] + [r"\b%s\b" % re.escape(n) for n in sorted(names)]
    return re.compile("|".join(alts))


def is_test(path):
    b = os.path.basename(path)
    return b.endswith(("_test.c", "_fuzz.c", "_test.h")) or "test_" in b or "/tests/" in path


def sources():
    for d, _, names in os.walk(SRC):
        for n in sorted(names):
            if n.endswith((".c", ".h")):
                yield os.path.join(d, n)


def unit_of(path):
    """The layer folder a file belongs to: 'core', 'server', 'providers/docker', ..."""
    rel = os.path.relpath(path, SRC).split(os.sep)
    if rel[0] == "providers" and len(rel) > 2:
        return "providers/" + rel[1]
    return rel[0]


def rank(unit):
    return RANK.get(unit.split("/")[0], 9)


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def functions(path, text):
    """(name, first line, length) of each function body: a '{' alone at column 0 after a
    signature, up to the next '}' at column 0 (the project's layout)."""
    lines = text.split("\n")
    out = []
    i = 0
    while i < len(lines):
        if lines[i] == "{" and i > 0:
            j = i - 1
            while j > 0 and "(" not in lines[j]:
                j -= 1
            m = re.search(r"([A-Za-z_][A-Za-z0-9_]*)\s*\(", re.sub(r"__attribute__\s*\(\(.*?\)\)", "", lines[j]))
            k = i + 1
            while k < len(lines) and lines[k] != "}" and not lines[k].startswith("};"):
                k += 1
            if m and not lines[j].lstrip().startswith(("struct", "static const", "const")) or \
                    m and re.match(r"^(static\s+)?[A-Za-z_].*\)\s*$", lines[i - 1]):
                out.append((m.group(1), j + 1, k - j + 1))
            i = k
        i += 1
    return out


def include_edges(files):
    edges = []
    for f in files:
        with open(f, encoding="utf-8", errors="replace") as fh:
            for n, line in enumerate(fh, 1):
                m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                if not m:
                    continue
                target = os.path.normpath(os.path.join(os.path.dirname(f), m.group(1)))
                if not target.startswith(SRC + os.sep):
                    continue
                a, b = unit_of(f), unit_of(target)
                if a == b:
                    continue
                ra, rb = rank(a), rank(b)
                kind = "up" if rb > ra else "across" if rb == ra else None
                if kind:
                    edges.append((kind, os.path.relpath(f, ROOT), n, os.path.relpath(target, ROOT)))
    return edges


def symbol_cycles(build):
    """Strongly connected groups of >1 non-test .c files, by who calls whom (nm of the objects)."""
    objs = collections.defaultdict(list)
    for d, _, names in os.walk(os.path.join(build, "src")):
        for n in names:
            if n.endswith(".c.o"):
                objs[n[:-2]].append(os.path.join(d, n))
    defined, wanted = {}, collections.defaultdict(set)
    for cname, paths in objs.items():
        p = paths[0]  # the same source compiled into several targets: one object says it all
        try:
            out = subprocess.run(["nm", "-P", p], capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.SubprocessError):
            return None
        src = os.path.relpath(os.path.dirname(p), build)  # e.g. src/providers/docker/x.p
        key = (os.path.dirname(src), cname)
        for line in out.splitlines():
            parts = line.split()
            if len(parts) < 2:
                continue
            sym, t = parts[0], parts[1]
            if t in "TDBR":
                defined.setdefault(sym, set()).add(key)
            elif t == "U":
                wanted[key].add(sym)
    # a file of a folder calls the definition in its own folder when there is one
    graph = collections.defaultdict(set)
    for key, syms in wanted.items():
        if is_test(key[1]) or "third_party" in key[1]:
            continue
        for s in syms:
            homes = defined.get(s, set())
            same = {h for h in homes if h[0] == key[0]} or homes
            for h in same:
                if h != key and not is_test(h[1]) and "third_party" not in h[1]:
                    graph[key].add(h)
    return [sorted(c) for c in tarjan(graph) if len(c) > 1]


def tarjan(graph):
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]
    nodes = set(graph) | {v for vs in graph.values() for v in vs}

    def visit(v):
        work = [(v, iter(sorted(graph.get(v, ()))))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        while work:
            node, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    advanced = True
                    break
                if w in on:
                    low[node] = min(low[node], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                out.append(comp)

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


TOKEN = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|[A-Za-z_][A-Za-z0-9_]*|\d[\w.]*|\S')
KEYWORDS = set("if else for while do switch case default return break continue goto struct union enum "
               "static const sizeof typedef void int char bool unsigned long short size_t".split())


def shape(line):
    toks = []
    for t in TOKEN.findall(line):
        if t[0] in "\"'":
            toks.append("S")
        elif t[0].isdigit():
            toks.append("N")
        elif t[0].isalpha() or t[0] == "_":
            toks.append(t if t in KEYWORDS else "I")
        else:
            toks.append(t)
    return " ".join(toks)


def duplicate_pairs(files, min_lines=6):
    """Pairs of places sharing a run of min_lines meaningful lines (same text or same shape).
    A window that stands in more than 8 places is boilerplate and not paired."""
    seqs = {}
    for f in files:
        with open(f, encoding="utf-8", errors="replace") as fh:
            text = strip_comments(fh.read())
        rows = []
        for n, line in enumerate(text.split("\n"), 1):
            s = line.strip()
            if not s or re.fullmatch(r"[{}();,\s]*", s) or s.startswith("#include"):
                continue
            rows.append((n, shape(s)))
        seqs[f] = rows
    where = collections.defaultdict(list)
    for f, rows in seqs.items():
        for i in range(len(rows) - min_lines + 1):
            key = "\n".join(r[1] for r in rows[i:i + min_lines])
            if len(set(key)) < 12:  # thin: only punctuation and placeholders
                continue
            where[key].append((f, i))
    pairs = set()
    for locs in where.values():
        if len(locs) < 2 or len(locs) > 8:
            continue
        for a in range(len(locs)):
            for b in range(a + 1, len(locs)):
                (fa, ia), (fb, ib) = locs[a], locs[b]
                if fa == fb and abs(ia - ib) < min_lines:
                    continue
                # one pair per two files and offset: overlapping windows of one run count once
                pairs.add((fa, fb, ia - ib if fa != fb else ia - ib))
    runs = collections.Counter((fa, fb) for fa, fb, _ in pairs)
    return len(runs), sum(runs.values())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", help="a finished meson build dir (for the call cycles)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    files = list(sources())
    prod = [f for f in files if not is_test(f)]
    cleanup = cleanup_pattern(files)
    own = collections.OrderedDict()
    long_fns, big_files = [], []
    for f in files:
        with open(f, encoding="utf-8", errors="replace") as fh:
            raw = fh.read()
        if raw.count("\n") > 800:
            big_files.append((os.path.relpath(f, ROOT), raw.count("\n")))
        if is_test(f):
            continue
        text = strip_comments(raw)
        u = unit_of(f)
        c = own.setdefault(u, [0, 0])
        text_nodef = re.sub(r"#\s*define[^\n]*", "", text)
        c[0] += len(cleanup.findall(text_nodef))
        c[1] += len(RELEASES.findall(text))
        if f.endswith(".c"):
            long_fns += [(os.path.relpath(f, ROOT), ln, name, n) for name, ln, n in functions(f, text) if n > 80]
    edges = include_edges(prod)
    cycles = symbol_cycles(args.build) if args.build and os.path.isdir(args.build) else None
    dup_files, dup_runs = duplicate_pairs(prod)
    report = {
        "ownership": {u: {"cleanup_declarations": c[0], "manual_releases": c[1]} for u, c in own.items()},
        "functions_over_80_lines": sorted(long_fns, key=lambda x: -x[3]),
        "files_over_800_lines": sorted(big_files, key=lambda x: -x[1]),
        "include_edges_up": [e[1:] for e in edges if e[0] == "up"],
        "include_edges_across": [e[1:] for e in edges if e[0] == "across"],
        "file_cycles": cycles,
        "duplicates": {"file_pairs": dup_files, "runs": dup_runs},
    }
    if args.json:
        json.dump(report, sys.stdout, indent=1)
        print()
        return 0
    print("house: ownership (cleanup declarations / manual releases), per layer:")
    for u, c in own.items():
        print("  %-20s %4d / %4d" % (u, c[0], c[1]))
    total = [sum(c[0] for c in own.values()), sum(c[1] for c in own.values())]
    print("  %-20s %4d / %4d" % ("all", total[0], total[1]))
    print("house: functions over 80 lines outside tests: %d (goal 0)" % len(long_fns))
    for f, ln, name, n in report["functions_over_80_lines"][:12]:
        print("  %4d  %s:%d %s" % (n, f, ln, name))
    print("house: files over 800 lines: %d" % len(big_files))
    for f, n in report["files_over_800_lines"]:
        print("  %4d  %s" % (n, f))
    up, across = report["include_edges_up"], report["include_edges_across"]
    print("house: include edges pointing up: %d, across: %d (goal 0)" % (len(up), len(across)))
    for f, n, t in (up + across)[:12]:
        print("  %s:%d -> %s" % (f, n, t))
    if cycles is None:
        print("house: file-level call cycles: not measured (needs --build with a finished build)")
    else:
        print("house: file-level call cycles: %d (goal 0)" % len(cycles))
        for c in cycles[:8]:
            print("  " + " <-> ".join("%s/%s" % (d.replace(".p", ""), n) for d, n in c))
    print("house: duplicate runs of 6+ lines: %d in %d file pairs" % (dup_runs, dup_files))
    return 0


if __name__ == "__main__":
    sys.exit(main())
