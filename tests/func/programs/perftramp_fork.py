"""perftramp.py's work in a parent and in a forked child at once: under
-X perf the child writes a map of its own (/tmp/perf-CHILD.map) while its
stacks still hold trampolines the parent made before the fork."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import perftramp  # noqa: E402

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 0.8
pid = os.fork()
if pid == 0:
    perftramp.outer(seconds)  # CHILD
    os._exit(0)
perftramp.outer(seconds)  # PARENT
os.waitpid(pid, 0)
