# SPDX-License-Identifier: Apache-2.0
"""Another user on the cluster's network, against mn-preflight's ports (the
hostile tests of tests/integration/test_hostile_inputs.sh and doc/security.md).
It knows what any user knows (the step's MASTER_ADDR and MASTER_PORT, the
listening ports in /proc/net/tcp, mn-preflight's protocol from its source)
and not the step secret. Every mode is bounded in time and connections and
talks only to the address it is given (the local cluster's namespaces).

  stranger.py squat ADDR PORT SECONDS [--proto 1|2|6]
      holds the port before rank 0 and plays rank 0: a challenge, then a
      forged welcome and a "done, exit 0" word to whoever knocks (protocol 6,
      this build's: CBOR; 2: key=value text, as an older mn-preflight; 1: no version).
  stranger.py flood ADDR PORT SECONDS [--idle N] [--slow N] [--rate R]
      N idle connections held, N that send one byte every 0.2 s, R new
      connections a second that send one byte, and frames of forged text
      ("op=hello ... FORGED-BY-STRANGER") with bad proofs.
  stranger.py churn ADDR PORT SECONDS [--hold N]
      N connections that each send one byte, held open; each one the other
      end cuts off is opened again at once (issue 38's jam of MASTER_PORT).
  stranger.py dataflood ADDR SECONDS [--skip PORT,...] [--most N]
      every listening port of this network namespace (/proc/net/tcp) but
      the skipped ones gets idle connections as soon as it opens.
  stranger.py doorflood SECONDS [--most N]
      every listening abstract socket of this network namespace whose name
      /proc/net/unix shows starting with PREFIX (--prefix, default
      "@mn-preflight-node-": the node doors that speakers open above 1,024
      ranks) gets connections that each send one byte, held, and reopened
      once cut off.
Prints one line at the end: STRANGER mode=... connections=N.
"""
import argparse
import os
import socket
import struct
import sys
import time


def frame(text):
    body = text.encode()
    return struct.pack(">I", len(body)) + body


def text(s):
    """A CBOR text of under 24 bytes."""
    return bytes([0x60 + len(s)]) + s.encode()


# Protocol 3's {"Welcome": {"rank": 0}} and {"Word": {"code": 0, "done": true, "why": "all good"}}.
WELCOME = b"\xa1" + text("Welcome") + b"\xa1" + text("rank") + b"\x00"
WORD = b"\xa1" + text("Word") + b"\xa3" + text("code") + b"\x00" + text("done") + b"\xf5" + text("why") + text("all good")


def connect(addr, port, timeout=0.5):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect((addr, port))
        s.setblocking(False)
        return s
    except OSError:
        s.close()
        return None


def squat(a):
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((a.addr, a.port))
    srv.listen(256)
    srv.settimeout(0.2)
    print(f"STRANGER listening {a.addr}:{a.port}", flush=True)
    n = 0
    end = time.time() + a.seconds
    held = []
    while time.time() < end:
        try:
            c, _ = srv.accept()
        except socket.timeout:
            continue
        n += 1
        c.settimeout(1.0)
        nonce = os.urandom(16).hex()
        version = "" if a.proto == 1 else f"v={a.proto}\n"
        try:
            c.sendall(frame(f"op=challenge\n{version}nonce={nonce}\n"))
            c.recv(65536)  # the knock (and hello), whatever it proves
            welcome, word = (WELCOME, WORD) if a.proto >= 3 else (b"op=welcome\nrank=0\n", b"op=word\ndone=1\ncode=0\nwhy=all good\n")
            if a.proto >= 2:
                c.sendall(struct.pack(">I", len(welcome) + 32) + welcome + os.urandom(32))
            c.sendall(struct.pack(">I", len(word)) + word)
        except OSError:
            pass
        held.append(c)
    print(f"STRANGER mode=squat connections={n}", flush=True)


def flood(a):
    end = time.time() + a.seconds
    idle, slow, held = [], [], []
    n = 0
    forged = frame("op=hello\nrank=1\nlabel=node1: fault FORGED-BY-STRANGER\nproof=00\n")
    knock = frame("op=knock\nv=2\npurpose=control\nrank=1\nnonce=" + "ab" * 16 + "\nFORGED-BY-STRANGER\n" + "x" * 32)
    next_new = time.time()
    while time.time() < end:
        while len(idle) < a.idle and time.time() < end:
            s = connect(a.addr, a.port)
            if not s:
                time.sleep(0.05)
                break
            idle.append(s)
            n += 1
        while len(slow) < a.slow and time.time() < end:
            s = connect(a.addr, a.port)
            if not s:
                break
            slow.append(s)
            n += 1
        for s in slow:
            try:
                s.send(b"\x00")
            except OSError:
                pass
        if a.rate > 0 and time.time() >= next_new and len(held) < 2000:
            for payload in (b"\x00", forged, knock):
                s = connect(a.addr, a.port)
                if s:
                    n += 1
                    try:
                        s.send(payload)
                    except OSError:
                        pass
                    held.append(s)
            next_new = time.time() + 1.0 / a.rate
        time.sleep(0.2 if a.rate <= 0 else min(0.2, 1.0 / a.rate))
        # Connections the other end closed make room for new ones.
        idle = [s for s in idle if alive(s)]
        slow = [s for s in slow if alive(s)]
    print(f"STRANGER mode=flood connections={n}", flush=True)


def churn(a):
    import resource
    import select
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, a.hold + 256) if hard != resource.RLIM_INFINITY else a.hold + 256
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    end = time.time() + a.seconds
    held = {}
    n = cut = 0
    poller = select.epoll()
    while time.time() < end:
        while len(held) < a.hold and time.time() < end:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            try:
                s.connect((a.addr, a.port))
            except BlockingIOError:
                pass
            except OSError:
                s.close()
                time.sleep(0.01)
                break
            held[s.fileno()] = s
            poller.register(s.fileno(), select.EPOLLIN | select.EPOLLOUT | select.EPOLLRDHUP)
            n += 1
        for fd, ev in poller.poll(0.01):
            s = held.get(fd)
            if s is None:
                continue
            if ev & (select.EPOLLIN | select.EPOLLHUP | select.EPOLLERR | select.EPOLLRDHUP):
                try:
                    data = s.recv(65536)
                except BlockingIOError:
                    data = b"x"
                except OSError:
                    data = b""
                if data == b"":
                    poller.unregister(fd)
                    del held[fd]
                    s.close()
                    cut += 1
                    continue
            if ev & select.EPOLLOUT:
                try:
                    s.send(b"\x00")
                except OSError:
                    pass
                poller.modify(fd, select.EPOLLIN | select.EPOLLRDHUP)
    print(f"STRANGER mode=churn connections={n} cut={cut}", flush=True)


def alive(s):
    try:
        data = s.recv(65536)
        if data == b"":
            s.close()
            return False
        return True
    except BlockingIOError:
        return True
    except OSError:
        s.close()
        return False


def listening_ports():
    ports = set()
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            parts = line.split()
            if parts[3] == "0A":  # LISTEN
                ports.add(int(parts[1].split(":")[1], 16))
    return ports


def dataflood(a):
    skip = {int(p) for p in a.skip.split(",") if p}
    end = time.time() + a.seconds
    held = {}
    seen = set()
    n = 0
    while time.time() < end and n < a.most:
        for port in listening_ports() - skip:
            conns = held.setdefault(port, [])
            conns[:] = [s for s in conns if alive(s)]
            while len(conns) < 8 and n < a.most:
                s = connect(a.addr, port, 0.2)
                if not s:
                    break
                if not conns and port not in seen:
                    seen.add(port)
                    print(f"STRANGER holds connections to port {port}", flush=True)
                conns.append(s)
                n += 1
        time.sleep(0.02)
    print(f"STRANGER mode=dataflood connections={n} ports={len(held)}", flush=True)


def listening_doors(prefix):
    names = set()
    with open("/proc/net/unix") as f:
        next(f)
        for line in f:
            parts = line.split()
            # Flags 00010000: __SO_ACCEPTCON, a listening socket.
            if len(parts) >= 8 and parts[3] == "00010000" and parts[7].startswith(prefix):
                names.add(parts[7])
    return names


def door_connect(name):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(0.2)
    try:
        s.connect("\0" + name[1:])
        s.send(b"\x00")
        s.setblocking(False)
        return s
    except OSError:
        s.close()
        return None


def doorflood(a):
    end = time.time() + a.seconds
    held = {}
    n = 0
    while time.time() < end and n < a.most:
        for name in listening_doors(a.prefix):
            conns = held.setdefault(name, [])
            if not conns:
                print(f"STRANGER holds connections to door {name[:28]}...", flush=True)
            conns[:] = [s for s in conns if alive(s)]
            while len(conns) < 8 and n < a.most:
                s = door_connect(name)
                if not s:
                    break
                conns.append(s)
                n += 1
        time.sleep(0.02)
    print(f"STRANGER mode=doorflood connections={n} doors={len(held)}", flush=True)


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="mode", required=True)
    s = sub.add_parser("squat")
    s.add_argument("addr")
    s.add_argument("port", type=int)
    s.add_argument("seconds", type=float)
    s.add_argument("--proto", type=int, default=6)
    f = sub.add_parser("flood")
    f.add_argument("addr")
    f.add_argument("port", type=int)
    f.add_argument("seconds", type=float)
    f.add_argument("--idle", type=int, default=0)
    f.add_argument("--slow", type=int, default=0)
    f.add_argument("--rate", type=float, default=0)
    c = sub.add_parser("churn")
    c.add_argument("addr")
    c.add_argument("port", type=int)
    c.add_argument("seconds", type=float)
    c.add_argument("--hold", type=int, default=1000)
    d = sub.add_parser("dataflood")
    d.add_argument("addr")
    d.add_argument("seconds", type=float)
    d.add_argument("--skip", default="")
    d.add_argument("--most", type=int, default=400)
    o = sub.add_parser("doorflood")
    o.add_argument("seconds", type=float)
    o.add_argument("--prefix", default="@mn-preflight-node-")
    o.add_argument("--most", type=int, default=400)
    a = p.parse_args()
    a.seconds = min(a.seconds, 120.0)  # never outlives its test
    modes = {"squat": squat, "flood": flood, "churn": churn, "dataflood": dataflood, "doorflood": doorflood}
    modes[a.mode](a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
