"""--native known answers for work CPython itself does for a line:
  regex    re.findall on a large text: the regex engine (sre_search,
           sre_ucs1_match...) under the REGEX line
  sorting  sorted() of a big list: list sort (list_sort_impl, merge_at,
           binarysort...) under the SORT line
usage: cpython_work.py [seconds]"""
import re
import sys
import time

SECONDS = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
TEXT = "alpha beta gamma delta 12345 epsilon " * 20000
PATTERN = re.compile(r"[a-z]+a\b")
BIG = [(i * 7919) % 100003 for i in range(200000)]


def regex():
    end = time.process_time() + SECONDS / 2
    n = 0
    while time.process_time() < end:
        n += len(PATTERN.findall(TEXT))  # REGEX
    return n


def sorting():
    end = time.process_time() + SECONDS / 2
    n = 0
    while time.process_time() < end:
        n += sorted(BIG)[0]  # SORT
    return n


regex()
sorting()
