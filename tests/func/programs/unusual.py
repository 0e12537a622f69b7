"""Code whose names are awkward for export formats: unicode identifiers and
file names, a file name with spaces and a ';', <lambda>, <module>-level
work, names ending in digits, and a very long qualified name. Each burns
CPU so it appears in every format. Run it with an output directory as
argv[1]: it writes the oddly named module there first."""
import os
import sys
import time


def spin(seconds):
    end = time.process_time() + seconds
    s = 0
    while time.process_time() < end:
        for i in range(2000):
            s += i
    return s


def größe_berechnen():  # unicode identifier
    return spin(0.3)


def func2024():  # ends in digits
    return spin(0.3)


class Outer:
    class Inner_Very_Long_Class_Name_That_Goes_On_And_On_For_A_While:
        def method_with_a_long_name_too(self):
            return spin(0.3)


ODD_MODULE = '''
import time
def weird_name_in_odd_file():
    end = time.process_time() + 0.3
    s = 0
    while time.process_time() < end:
        s += sum(range(2000))
end = time.process_time() + 0.3
while time.process_time() < end:   # <module>-level work
    sum(range(2000))
'''


def main(outdir):
    größe_berechnen()
    func2024()
    Outer.Inner_Very_Long_Class_Name_That_Goes_On_And_On_For_A_While().method_with_a_long_name_too()
    (lambda: spin(0.3))()
    path = os.path.join(outdir, "odd dir; ünïcode")
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "mod ;name.py"), "w") as f:
        f.write(ODD_MODULE)
    ns = {}
    code = compile(ODD_MODULE, os.path.join(path, "mod ;name.py"), "exec")
    exec(code, ns)
    ns["weird_name_in_odd_file"]()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
