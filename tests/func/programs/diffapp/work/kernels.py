"""The work of diffapp (app.py): three loops of the same kind, each in its
own function and on its own lines, so each one's cost is its own."""


def grow(n):
    s = 0
    for i in range(n):
        s += i * i
    return s


def steady(n):
    s = 0
    for i in range(n):
        s += i * i
    return s


def shrink(n):
    s = 0
    for i in range(n):
        s += i * i
    return s
