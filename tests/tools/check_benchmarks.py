"""Checks BENCHMARKS.md is a report and the docs' links into the reports hold.

Usage: python3 check_benchmarks.py TOP_SRCDIR. Prints one line a finding,
"FAIL: ..." for each problem, and exits 1 if there was any.

- BENCHMARKS.md has at most MAX_LINES lines;
- every table in it follows a "**Run:**" line (in the same section) that
  names a command in backquotes, a date (YYYY-MM-DD) and a commit (7 to 40
  hex digits in backquotes, or "not recorded"), and every results file it
  names (results/NAME) is in bench/results/;
- every relative link from README.md, BENCHMARKS.md, bench/NOTES.md and
  doc/*.md to a Markdown file reaches a file that exists and, where it names
  an anchor, a heading of that file (GitHub's anchors).
"""
import glob
import os
import re
import sys

MAX_LINES = 200


def slug(heading):
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors(path):
    seen, out = {}, set()
    in_code = False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("```"):
                in_code = not in_code
            if in_code:
                continue
            m = re.match(r"#{1,6} (.*)", line)
            if not m:
                continue
            s = slug(m.group(1))
            n = seen.get(s, 0)
            seen[s] = n + 1
            out.add(s if n == 0 else "%s-%d" % (s, n))
    return out


def check_report(top, fails):
    path = os.path.join(top, "BENCHMARKS.md")
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) > MAX_LINES:
        fails.append("BENCHMARKS.md has %d lines, more than %d: the reruns "
                     "and their stories go to bench/NOTES.md" %
                     (len(lines), MAX_LINES))
    run, tables = None, 0
    for i, line in enumerate(lines, 1):
        if line.startswith("## "):
            run = None
        elif line.startswith("**Run:**"):
            run = (i, line)
            for name in re.findall(r"results/([\w.-]+\.jsonl)", line):
                if not os.path.exists(os.path.join(top, "bench", "results",
                                                   name)):
                    fails.append("BENCHMARKS.md:%d names results/%s, which "
                                 "is not in bench/results" % (i, name))
            if not re.search(r"`[^`]+`", line):
                fails.append("BENCHMARKS.md:%d: the Run line names no "
                             "command" % i)
            if not re.search(r"\b20\d\d-\d\d-\d\d", line):
                fails.append("BENCHMARKS.md:%d: the Run line has no date "
                             "(YYYY-MM-DD)" % i)
            if not (re.search(r"`[0-9a-f]{7,40}`", line)
                    or "not recorded" in line):
                fails.append("BENCHMARKS.md:%d: the Run line has no commit "
                             "(`hash` or \"not recorded\")" % i)
        elif re.match(r"\|\s*-+", line):
            tables += 1
            if run is None:
                fails.append("BENCHMARKS.md:%d: a table with no **Run:** "
                             "line (command, machine, date, commit) before "
                             "it in its section" % (i - 1))
    return len(lines), tables


def check_links(top, fails):
    files = [os.path.join(top, p) for p in ("README.md", "BENCHMARKS.md",
                                            "bench/NOTES.md")]
    files += sorted(glob.glob(os.path.join(top, "doc", "*.md")))
    cache, links = {}, 0
    for src in files:
        with open(src, encoding="utf-8") as f:
            text = f.read()
        for m in re.finditer(r"\]\(([^)\s]+)\)", text):
            target = m.group(1)
            if re.match(r"[a-z]+:", target):
                continue
            file_part, _, anchor = target.partition("#")
            if file_part and not file_part.endswith(".md"):
                continue
            dest = (os.path.normpath(os.path.join(os.path.dirname(src),
                                                  file_part))
                    if file_part else src)
            rel = os.path.relpath(src, top)
            line = text.count("\n", 0, m.start()) + 1
            links += 1
            if not os.path.exists(dest):
                fails.append("%s:%d links to %s, which does not exist" %
                             (rel, line, target))
                continue
            if anchor:
                if dest not in cache:
                    cache[dest] = anchors(dest)
                if anchor not in cache[dest]:
                    fails.append("%s:%d links to %s: no such heading in %s" %
                                 (rel, line, target,
                                  os.path.relpath(dest, top)))
    return links


def main():
    top = sys.argv[1]
    fails = []
    n, tables = check_report(top, fails)
    links = check_links(top, fails)
    for f in fails:
        print("FAIL: " + f)
    if not fails:
        print("BENCHMARKS.md: %d lines, %d tables, each after a Run line; "
              "%d links into Markdown files hold" % (n, tables, links))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
