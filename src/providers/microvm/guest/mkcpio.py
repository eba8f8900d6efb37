#!/usr/bin/env python3
"""mkcpio.py: write a directory tree as a newc cpio archive (the Linux initramfs format).

Deterministic: entries sorted by path, owner 0:0, mtime 0, inode numbers assigned in order, so
the same files give the same bytes and the environment identity (a SHA-256 over the kernel and
this archive) changes only when a file does. Regular files, directories and symbolic links.
Usage: mkcpio.py DIR OUT
"""
import os
import stat
import sys


def header(ino, mode, nlink, size, name):
    fields = [ino, mode, 0, 0, nlink, 0, size, 0, 0, 0, 0, len(name) + 1, 0]
    h = b"070701" + b"".join(b"%08x" % f for f in fields)
    return h + name.encode() + b"\0"


def pad(n):
    return b"\0" * ((4 - n % 4) % 4)


def main():
    root, out = sys.argv[1], sys.argv[2]
    entries = []
    for d, dirs, files in os.walk(root):
        for n in dirs + files:
            p = os.path.join(d, n)
            entries.append(os.path.relpath(p, root))
    entries.sort()
    with open(out, "wb") as f:
        ino = 1
        for rel in entries:
            p = os.path.join(root, rel)
            st = os.lstat(p)
            if stat.S_ISDIR(st.st_mode):
                h = header(ino, stat.S_IFDIR | 0o755, 2, 0, rel)
                f.write(h + pad(len(h)))
            elif stat.S_ISLNK(st.st_mode):
                target = os.readlink(p).encode()
                h = header(ino, stat.S_IFLNK | 0o777, 1, len(target), rel)
                f.write(h + pad(len(h)) + target + pad(len(target)))
            elif stat.S_ISREG(st.st_mode):
                data = open(p, "rb").read()
                mode = stat.S_IFREG | (0o755 if st.st_mode & 0o111 else 0o644)
                h = header(ino, mode, 1, len(data), rel)
                f.write(h + pad(len(h)) + data + pad(len(data)))
            else:
                sys.exit("mkcpio: %s: only files, directories and links" % rel)
            ino += 1
        h = header(0, 0, 1, 0, "TRAILER!!!")
        f.write(h + pad(len(h)))


if __name__ == "__main__":
    main()
