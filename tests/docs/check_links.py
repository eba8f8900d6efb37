"""The docs stand alone (issue 19, item 7): every relative link and every file reference in
README.md, docs/ and man/ names a path that exists in this repository, and no doc points at the
reference's specification files, which are not here. Exit 1 naming each bad reference."""
import os
import re
import shutil
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "../.."))
TOP_DIRS = ("docs", "src", "man", "tests", "scripts", "images", "bench", "fuzz", "contrib", "proto", "third_party")
# Markdown links [text](target): every target that is not a URL or an in-page anchor.
LINK = re.compile(r"\]\(([^)\s]+)\)")
# Repository paths as written in prose or code spans: docs/x.md, src/core/limits.h, ...
PATH = re.compile(r"(?<![\w./-])((?:%s)/[A-Za-z0-9_.+/-]*[A-Za-z0-9_+/-])" % "|".join(TOP_DIRS))
# Any *.md file named on its own (README.md, grants.md): it must be ours.
MD = re.compile(r"(?<![\w/.-])([A-Za-z0-9_-]+\.md)\b")
# The reference's files, which this repository does not carry, in any spelling.
FOREIGN = re.compile(r"shared/spec|\bwire\.md\b|\bproviders\.md\b|\bDESIGN\.md\b|\bSTYLE\.md\b|spec sessions\.md|"
                     r"sessions\.md §")
# Paths that name a pattern or a generated file, not one file in the tree.
SKIP = re.compile(r"[*{}<>]|XXXX|/$")
GENERATED = ("build/", "third_party/microvm/")


def sources():
    yield os.path.join(ROOT, "README.md")
    for d in ("docs", "man"):
        for name in sorted(os.listdir(os.path.join(ROOT, d))):
            if name.endswith((".md", ".1", ".8")):
                yield os.path.join(ROOT, d, name)


def exists(base_dir, target):
    target = target.split("#")[0]
    if not target:
        return True
    return os.path.exists(os.path.normpath(os.path.join(base_dir, target))) or \
        os.path.exists(os.path.join(ROOT, target))


def check(path):
    bad = []
    here = os.path.dirname(path)
    rel = os.path.relpath(path, ROOT)
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for n, line in enumerate(lines, 1):
        text = line.replace("\\-", "-").replace("\\fB", "").replace("\\fR", "").replace("\\fI", "")
        where = "%s:%d" % (rel, n)
        for m in FOREIGN.finditer(text):
            bad.append("%s: points outside the repository (%s)" % (where, m.group(0)))
        for m in LINK.finditer(text):
            t = m.group(1)
            if re.match(r"[a-z][a-z0-9+.-]*:", t) or t.startswith("#"):
                continue
            if not exists(here, t):
                bad.append("%s: link to a missing file: %s" % (where, t))
        for m in PATH.finditer(text):
            t = m.group(1).rstrip(".")
            if SKIP.search(t) or t.startswith(GENERATED):
                continue
            if not os.path.exists(os.path.join(ROOT, t)):
                bad.append("%s: names a missing path: %s" % (where, t))
        for m in MD.finditer(text):
            t = m.group(1)
            if not (os.path.exists(os.path.join(here, t)) or os.path.exists(os.path.join(ROOT, t)) or
                    os.path.exists(os.path.join(ROOT, "docs", t))):
                bad.append("%s: names a missing document: %s" % (where, t))
    return bad


def scan():
    bad = []
    files = list(sources())
    for p in files:
        bad += check(p)
    return files, bad


def self_test():
    """The checker itself must catch each kind of bad reference, and pass a clean tree."""
    global ROOT
    saved, tmp = ROOT, tempfile.mkdtemp()
    try:
        for d in ("docs", "man", "src/core"):
            os.makedirs(os.path.join(tmp, d))
        open(os.path.join(tmp, "src/core/real.c"), "w").close()
        with open(os.path.join(tmp, "docs/a.md"), "w") as f:
            f.write("See [b](b.md), `src/core/real.c` and docs/a.md.\n")
        with open(os.path.join(tmp, "docs/b.md"), "w") as f:
            f.write("Back to [a](a.md#top) and [the site](https://example.org/x.md).\n")
        with open(os.path.join(tmp, "README.md"), "w") as f:
            f.write("Start at [docs](docs/a.md).\n")
        with open(os.path.join(tmp, "man/x.1"), "w") as f:
            f.write(".TH X 1\nSee docs/b.md.\n")
        ROOT = tmp
        _, bad = scan()
        if bad:
            print("self-test: a clean tree was flagged:", bad)
            return 1
        cases = ["[gone](gone.md)", "`src/core/missing.c`", "as wire.md says", "see providers.md",
                 "`shared/spec/x.md`", "STYLE.md §4", "[up](../outside.md)", "sessions.md §3"]
        for text in cases:
            with open(os.path.join(tmp, "docs/b.md"), "w") as f:
                f.write("Fine line.\n" + text + "\n")
            _, bad = scan()
            if not bad:
                print("self-test: not caught: %r" % text)
                return 1
        print("self-test: %d bad references caught, a clean tree passes" % len(cases))
        return 0
    finally:
        ROOT = saved
        shutil.rmtree(tmp)


def main():
    global ROOT
    if len(sys.argv) > 1:
        ROOT = os.path.abspath(sys.argv[1])
    if self_test():
        return 1
    files, bad = scan()
    for b in bad:
        print(b)
    print("%d files checked, %d bad references" % (len(files), len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
