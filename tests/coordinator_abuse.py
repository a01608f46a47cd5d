#!/usr/bin/python3
"""The cocod-coordinator program against clients that do not play by the rules, as anyone who
reaches its port can be: each bad request of the list below, then a check that the program is
alive, still serves a well-behaved client, and holds bounded memory; out of file descriptors, it
must not spin.

  coordinator_abuse.py COORDINATOR    (exit 0: every check held)
"""
import os
import re
import resource
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

PROTOCOL = b"cocod-store/2"
failures = []


def check(ok, what):
    print(("ok       " if ok else "FAILED   ") + what, flush=True)
    if not ok:
        failures.append(what)


def request(verb, key, value=b""):
    return verb + struct.pack("<I", len(key)) + key + struct.pack("<I", len(value)) + value


def connect(port, token=b"", hello=True):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    if hello:
        s.sendall(request(b"H", PROTOCOL, token))
        reply = read_reply(s)
        if reply is None or reply[0] != 0:
            s.close()
            return None
    return s


def read_exact(s, n):
    data = b""
    while len(data) < n:
        try:
            part = s.recv(n - len(data))
        except (socket.timeout, ConnectionError):
            return None
        if not part:
            return None
        data += part
    return data


def read_reply(s):
    head = read_exact(s, 5)
    if head is None:
        return None
    status, n = head[0], struct.unpack("<I", head[1:])[0]
    value = read_exact(s, n)
    return None if value is None else (status, value)


def served(port, token=b""):
    """A well-behaved client gets an answer (try_get of a missing key: status 1)."""
    try:
        s = connect(port, token)
        if s is None:
            return False
        s.sendall(request(b"T", b"elastic/nothing"))
        reply = read_reply(s)
        s.close()
        return reply is not None and reply[0] == 1
    except OSError:
        return False


def closed_by_server(s):
    s.settimeout(5)
    try:
        while True:
            part = s.recv(4096)
            if not part:
                return True
    except socket.timeout:
        return False
    except ConnectionError:
        return True


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start(coordinator, token_file, nofile):
    def limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
    p = subprocess.Popen([coordinator, "--port", "0", "--bind", "127.0.0.1", "--token-file", token_file],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, preexec_fn=limit)
    line = p.stdout.readline()
    m = re.search(r"port (\d+)", line)
    if not m:
        print(line + p.stdout.read())
        sys.exit("the coordinator did not start")
    return p, int(m.group(1))


def main():
    coordinator = sys.argv[1]
    with tempfile.TemporaryDirectory() as work:
        token_file = os.path.join(work, "token")
        token = b"a-token-for-this-test"
        with open(token_file, "wb") as f:
            f.write(token + b"\n")
        p, port = start(coordinator, token_file, 64)
        try:
            check(served(port, token), "a client with the token is served")
            check(not served(port), "a client without the token is refused")
            check(not served(port, b"a-token-for-this-tesT"), "a client with another token is refused")

            # the 20-byte request that aborted it: a wait whose timeout is not a number
            s = connect(port, token)
            s.sendall(request(b"W", b"x", b"k\0"))
            check(closed_by_server(s), "a wait with a non-numeric timeout closes that connection")
            # a malformed report of a member, an unknown verb, a key too long
            for what, raw in [("an unknown verb", request(b"Z", b"k")),
                              ("a key of 1 MiB", request(b"S", b"k" * (1 << 20), b"v")),
                              ("an add of 3 bytes", request(b"A", b"elastic/next_id", b"abc"))]:
                s = connect(port, token)
                try:
                    s.sendall(raw)
                    closed = closed_by_server(s)
                except ConnectionError:  # closed while it was still sending
                    closed = True
                check(closed, what + " closes that connection")
            # writes to the membership, and an id flood: refused, the connection kept
            s = connect(port, token)
            for key, value, verb in [(b"elastic/worker/2/expelled", b"x", b"S"), (b"elastic/worker/1/finished", b"1", b"S"),
                                     (b"elastic/epoch", b"7", b"S"),
                                     (b"elastic/next_id", struct.pack("<q", 10 ** 9), b"A")]:
                s.sendall(request(verb, key, value))
                reply = read_reply(s)
                check(reply is not None and reply[0] == 4, "%s of %s is refused" % (verb.decode(), key.decode()))
            s.close()

            # 8 connections that announce 64 MiB values: memory stays bounded
            before = rss_kib(p.pid)
            big = []
            for _ in range(8):
                c = connect(port, token)
                try:
                    c.sendall(b"S" + struct.pack("<I", 3) + b"key" + struct.pack("<I", 64 << 20) + b"x" * 4096)
                except ConnectionError:
                    pass
                big.append(c)
            time.sleep(0.3)
            grown = rss_kib(p.pid) - before
            check(grown < 16 * 1024, "8 announced values of 64 MiB grow its memory by %d KiB (< 16 MiB)" % grown)
            for c in big:
                c.close()

            # out of file descriptors (its limit is 64): it must not spin, and it serves again after
            held = []
            for _ in range(80):
                try:
                    held.append(socket.create_connection(("127.0.0.1", port), timeout=2))
                except OSError:
                    break
            time.sleep(0.5)
            cpu0, t0 = cpu_seconds(p.pid), time.monotonic()
            time.sleep(2.0)
            rate = (cpu_seconds(p.pid) - cpu0) / (time.monotonic() - t0)
            check(rate < 0.3, "out of file descriptors it uses %.2f CPU-s/s (< 0.3)" % rate)
            for c in held:
                c.close()
            deadline = time.monotonic() + 15
            ok = False
            while not ok and time.monotonic() < deadline:
                ok = served(port, token)
                time.sleep(0.1)
            check(ok, "once the connections closed it serves again")
            check(p.poll() is None, "it is alive")
            check(rss_kib(p.pid) < 64 * 1024, "its memory at the end: %d KiB (< 64 MiB)" % rss_kib(p.pid))
        finally:
            p.send_signal(signal.SIGTERM)
            try:
                out, _ = p.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                out, _ = p.communicate()
                failures.append("it did not stop on SIGTERM")
        check(p.returncode == 0, "it stopped on SIGTERM with exit status 0 (got %s)" % p.returncode)
    # the token from the environment (no --token-file); no token at all off loopback: a warning
    env = dict(os.environ, COCOD_TOKEN="from-the-environment")
    p = subprocess.Popen([coordinator, "--port", "0", "--bind", "127.0.0.1"], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, env=env)
    port = int(re.search(r"port (\d+)", p.stdout.readline()).group(1))
    check(served(port, b"from-the-environment") and not served(port), "COCOD_TOKEN is the run's token")
    p.terminate()
    p.communicate(timeout=10)
    env.pop("COCOD_TOKEN")
    p = subprocess.Popen([coordinator, "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    first = p.stdout.readline()
    p.terminate()
    _, err = p.communicate(timeout=10)
    check("no token" in first and "warning: no token" in err, "without a token on every interface it warns: %r" % err.strip())
    print("# coordinator abuse: %s" % ("OK" if not failures else "%d FAILED" % len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
