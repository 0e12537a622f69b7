"""split.py (beside this file) for an attach: prints "ready" once the
interpreter runs the program, then burns 3:1 for SECONDS (argv[1])."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import split  # noqa: E402

print("ready", flush=True)
split.main(float(sys.argv[1]))
