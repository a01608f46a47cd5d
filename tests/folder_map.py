#!/usr/bin/env python3
"""The folder map of docs/extending.md is kept true: every #include "cocod/..." of every header
under include/ goes to the header's own folder or to a folder its row allows (the exceptions the
page names aside), and every folder of include/cocod/ has a row.

usage: folder_map.py ROOT"""
import os
import re
import sys

UMBRELLAS = {"cocod.hpp": None, "cocod/checkpoint.hpp": "cocod/checkpoint/", "cocod/torch.hpp": "cocod/torch/"}


def folder_of(header):
    """The map's folder of a header path relative to include/ ("cocod/comm/detail/x.hpp" -> "cocod/comm/")."""
    if header in UMBRELLAS:
        return UMBRELLAS[header]
    parts = header.split("/")
    return "cocod/" if len(parts) == 2 else "cocod/%s/" % parts[1]


def main():
    root = sys.argv[1]
    page = open(os.path.join(root, "docs", "extending.md")).read()
    section = page.split("## The map of the folders", 1)[1].split("\n## ", 1)[0]
    allowed = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and re.fullmatch(r"`cocod/[a-z_/]*`", cells[0]):
            allowed[cells[0].strip("`")] = set(re.findall(r"`(cocod/[a-z_/]*)`", cells[2]))
    exceptions = set(re.findall(r"`(cocod/[a-z_/]+\.hpp)` includes\s+`(cocod/[a-z_/]+\.hpp)`", section))
    if not allowed:
        sys.exit("folder_map.py: docs/extending.md has no map of the folders")
    problems, used = [], set()
    include = os.path.join(root, "include")
    for dirpath, _, files in os.walk(os.path.join(include, "cocod")):
        rel = os.path.relpath(dirpath, include) + "/"
        if folder_of(rel + "x.hpp") not in allowed:
            problems.append("include/%s has no row in the map" % rel)
    for dirpath, _, files in os.walk(include):
        for name in sorted(files):
            if not name.endswith(".hpp"):
                continue
            header = os.path.relpath(os.path.join(dirpath, name), include)
            here = folder_of(header)
            for target in re.findall(r'^\s*#\s*include\s+"(cocod/[^"]+)"', open(os.path.join(dirpath, name)).read(), re.M):
                there = folder_of(target)
                if here is None or there == here or (header, target) in exceptions:
                    used.add((header, target))
                    continue
                if there not in allowed.get(here, set()):
                    problems.append("include/%s includes %s: the map does not let %s include %s" % (header, target, here, there))
    for e in sorted(exceptions - used):
        problems.append("the map names an exception that no header has: %s includes %s" % e)
    for p in problems:
        print(p)
    print("folder_map.py: %d folders, %d problems" % (len(allowed), len(problems)))
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
