"""Imported in the middle of answers.py's run."""
import time


def late_work():
    end = time.process_time() + 0.3
    s = 0
    while time.process_time() < end:
        for i in range(2000):
            s += i
    return s
