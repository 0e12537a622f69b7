"""logstats v2: the after of docs/diff.md's example.

Parses a synthetic access log, keeps the first request of each client,
and counts status codes per path. v1 (../v1/logstats.py) was the same
program before a "small cleanup" made dedupe() slow here: `strata diff`
finds it.
"""
import random
import sys


def make_log(n):
    rng = random.Random(7)
    paths = ["/", "/login", "/api/items", "/api/items/42", "/static/app.js"]
    return ["10.0.%d.%d - - \"GET %s HTTP/1.1\" %d" % (rng.randrange(2), rng.randrange(40),
                                                      rng.choice(paths), rng.choice((200, 200, 304, 404)))
            for _ in range(n)]


def parse(line):
    client, _, rest = line.partition(" - - ")
    request, _, status = rest.rpartition(" ")
    return client, request.split()[1], int(status)


def dedupe(records):
    seen = []
    out = []
    for client, path, status in records:
        if client not in seen:
            seen.append(client)
            out.append((client, path, status))
    return out


def count(records):
    by_path = {}
    for _, path, status in records:
        per = by_path.setdefault(path, {})
        per[status] = per.get(status, 0) + 1
    return by_path


def main(n, rounds):
    log = make_log(n)
    for _ in range(rounds):
        records = [parse(line) for line in log]
        first = dedupe(records)
        stats = count(records)
    print(len(first), "clients,", sum(sum(v.values()) for v in stats.values()), "requests")


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
