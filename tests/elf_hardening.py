"""The built binaries are PIE with full RELRO (a GNU_RELRO segment and BIND_NOW), as STYLE.md §11
asks (issue 12). Reads each ELF with readelf. First it proves it can fail: a binary linked
-no-pie -z norelro -z lazy with the same compiler must be refused, or the check itself fails.
Usage: elf_hardening.py --cc CC FILE..."""
import os
import subprocess
import sys
import tempfile


def readelf(flag, path):
    return subprocess.run(["readelf", flag, "-W", path], check=True, capture_output=True, text=True).stdout


def problems(path):
    out = []
    if "DYN (" not in readelf("-h", path):
        out.append("not position-independent (ELF type is not DYN)")
    if "GNU_RELRO" not in readelf("-l", path):
        out.append("no GNU_RELRO segment")
    dyn = readelf("-d", path)
    flags = [line for line in dyn.splitlines() if "(FLAGS" in line]
    if not any("BIND_NOW" in f or " NOW" in f for f in flags):
        out.append("not linked with BIND_NOW (-z now)")
    if not any("PIE" in f for f in flags):
        out.append("no PIE flag in FLAGS_1")
    return out


def main():
    args = sys.argv[1:]
    if len(args) < 3 or args[0] != "--cc":
        print("usage: elf_hardening.py --cc CC FILE...")
        return 1
    cc, files = args[1], args[2:]
    with tempfile.TemporaryDirectory() as tmp:
        src, bad = os.path.join(tmp, "t.c"), os.path.join(tmp, "t")
        with open(src, "w") as f:
            f.write("int main(void) { return 0; }\n")
        subprocess.run([cc, "-fno-pie", "-no-pie", "-Wl,-z,norelro", "-Wl,-z,lazy", "-o", bad, src], check=True)
        if len(problems(bad)) < 3:
            print("not ok - the check accepts a non-PIE, lazy-binding binary: %s" % problems(bad))
            return 1
        print("ok - a non-PIE, norelro, lazy binary is refused: %s" % "; ".join(problems(bad)))
    failed = 0
    for path in files:
        p = problems(path)
        print(("ok - %s" if not p else "not ok - %s: " + "; ".join(p)) % os.path.basename(path))
        failed += bool(p)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
