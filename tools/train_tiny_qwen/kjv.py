"""The King James Bible as training text, from Debian's bible-kjv-text (the data) through the
`bible` tool of bible-kjv (the data is stored in its own compressed format, so the tool is needed).

    bible -l0 Gen1:1-Rev22:21

prints every chapter as a heading ("Genesis 1"), then one line per verse ("  3 And God said, ..."):
-l0 turns off line wrapping, so a verse is exactly one line. We keep only the verse text, one verse
per line, and drop the headings and verse numbers: the model should learn prose, not references.
Books are returned separately so the caller can put an end-of-text token between them.
"""
import re
import subprocess

VERSE = re.compile(r"^\s+(\d+) (.*)$")
HEADING = re.compile(r"^(.+) (\d+)$")  # "Genesis 1", "1 Samuel 3", "Song of Solomon 2"


def books():
    """[(book name, [verse text, ...]), ...] in canonical order (66 books, 31102 verses)."""
    out = subprocess.run(["bible", "-l0", "Gen1:1-Rev22:21"], check=True, capture_output=True, text=True).stdout
    result = []
    for line in out.splitlines():
        if not line.strip():
            continue
        if m := VERSE.match(line):
            result[-1][1].append(m.group(2).strip())
        elif m := HEADING.match(line):
            if not result or result[-1][0] != m.group(1):
                result.append((m.group(1), []))
        else:
            raise ValueError(f"unexpected line from `bible`: {line!r}")
    return result


if __name__ == "__main__":
    bs = books()
    print(len(bs), "books,", sum(len(v) for _, v in bs), "verses")
    print(bs[0][1][:3])
