"""streams: many concurrent TCP connections, each with its own payload, echoed
and checked byte for byte. Run under libwanshim on testbed nodes to drive many
streams through the relays at once.

  streams.py serve IP PORT N       accept N connections; echo each one's bytes
                                   back until it half-closes; print one line
                                   "peer IP:PORT" per connection (what accept
                                   and getpeername report), then "served N"
  streams.py connect SRC IP PORT N BYTES
                                   N connections from SRC, all open at once;
                                   connection i sends BYTES of pattern i,
                                   half-closes and checks the echo; prints
                                   "ok N" or "mismatch ..." (exit 3)
"""
import selectors
import socket
import sys


def pattern(i: int, n: int) -> bytes:
    unit = bytes((i * 131 + k * 7) & 0xFF for k in range(251))
    return (unit * (n // 251 + 1))[:n]


def serve(ip: str, port: int, count: int) -> None:
    sel = selectors.DefaultSelector()
    listener = socket.create_server((ip, port), backlog=count)
    print(f"listening {listener.getsockname()[1]}", flush=True)
    sel.register(listener, selectors.EVENT_READ)
    accepted = done = 0
    while done < count:
        for key, _ in sel.select(timeout=60) or sys.exit("serve: nothing happened for 60 s"):
            if key.fileobj is listener:
                conn, addr = listener.accept()
                peer = conn.getpeername()
                assert peer == addr, (peer, addr)
                print(f"peer {addr[0]}:{addr[1]}", flush=True)
                conn.setblocking(False)
                sel.register(conn, selectors.EVENT_READ)
                accepted += 1
                if accepted == count:
                    sel.unregister(listener)
                continue
            conn = key.fileobj
            data = conn.recv(65536)
            if data:
                conn.setblocking(True)
                conn.sendall(data)
                conn.setblocking(False)
            else:
                sel.unregister(conn)
                conn.shutdown(socket.SHUT_WR)
                conn.close()
                done += 1
    print(f"served {done}", flush=True)


def connect(src: str, ip: str, port: int, count: int, size: int) -> None:
    sel = selectors.DefaultSelector()
    state = {}
    for i in range(count):
        s = socket.socket()
        s.bind((src, 0))
        s.connect((ip, port))
        assert s.getpeername() == (ip, port), s.getpeername()
        s.setblocking(False)
        state[s] = {"i": i, "out": memoryview(pattern(i, size)), "got": bytearray()}
        sel.register(s, selectors.EVENT_READ | selectors.EVENT_WRITE)
    open_ = count
    while open_:
        for key, events in sel.select(timeout=60) or sys.exit("connect: nothing happened for 60 s"):
            s, st = key.fileobj, state[key.fileobj]
            if events & selectors.EVENT_WRITE and st["out"] is not None:
                sent = s.send(st["out"][:65536])
                st["out"] = st["out"][sent:]
                if not len(st["out"]):
                    st["out"] = None
                    s.shutdown(socket.SHUT_WR)
                    sel.modify(s, selectors.EVENT_READ)
            if events & selectors.EVENT_READ:
                data = s.recv(65536)
                if data:
                    st["got"] += data
                else:
                    sel.unregister(s)
                    s.close()
                    open_ -= 1
                    if bytes(st["got"]) != pattern(st["i"], size):
                        print(f"mismatch on connection {st['i']}: {len(st['got'])} bytes back of {size}")
                        sys.exit(3)
    print(f"ok {count}", flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        connect(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]))
