"""A function whose line HOT does almost all of the work."""
import math
import sys
import time


def work(n):
    total = 0.0
    for i in range(n):
        x = i % 7
        total += math.sqrt(i) * math.sin(i) * math.cos(i) / (1.0 + math.log1p(i)) + math.atan2(i, 3.0) * math.tanh(i * 1e-6) + math.exp(-i * 1e-9)  # HOT
    return total


def main(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        work(20_000)


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 2.0)
