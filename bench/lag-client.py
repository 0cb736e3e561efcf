#!/usr/bin/env python3
"""Replication lag: on the provider, modify one entry N times at RATE per second; after each modify's
response, read the entry on the consumer (base searches on one connection, back to back) until the
new value is there. Prints p50/p99/max of (seen on consumer - modify answered), in milliseconds.
Usage: lag-client.py PROVIDER_PORT CONSUMER_PORT DN N RATE BIND_DN PASSWORD. No dependencies: raw BER."""
import socket, sys, time

def length(n):
    if n < 0x80: return bytes([n])
    b = n.to_bytes((n.bit_length() + 7) // 8, 'big')
    return bytes([0x80 | len(b)]) + b
def tlv(tag, body): return bytes([tag]) + length(len(body)) + body
def integer(tag, v): return tlv(tag, v.to_bytes(max(1, (v.bit_length() + 8) // 8), 'big', signed=True))
def octets(s, tag=0x04): return tlv(tag, s.encode() if isinstance(s, str) else s)

def bind(msgid, dn, pw):
    return tlv(0x30, integer(0x02, msgid) + tlv(0x60, integer(0x02, 3) + octets(dn) + octets(pw, 0x80)))
def modify(msgid, dn, value):
    change = tlv(0x30, integer(0x0a, 2) + tlv(0x30, octets('description') + tlv(0x31, octets(value))))
    return tlv(0x30, integer(0x02, msgid) + tlv(0x66, octets(dn) + tlv(0x30, change)))
def base_search(msgid, dn, value):
    filt = tlv(0xa3, octets('description') + octets(value))
    body = octets(dn) + integer(0x0a, 0) + integer(0x0a, 0) + integer(0x02, 0) + integer(0x02, 0) \
        + tlv(0x01, b'\x00') + filt + tlv(0x30, octets('1.1'))
    return tlv(0x30, integer(0x02, msgid) + tlv(0x63, body))

def read_message(sock, buf):
    """(protocol op tag, rest of buffer) of the next whole message."""
    while True:
        if len(buf) >= 2:
            first = buf[1]
            if first < 0x80: hdr, n = 2, first
            else:
                k = first & 0x7f
                hdr, n = (2 + k, int.from_bytes(buf[2:2 + k], 'big')) if len(buf) >= 2 + k else (None, None)
            if hdr is not None and len(buf) >= hdr + n:
                id_len = buf[hdr + 1]
                return buf[hdr + 2 + id_len], buf[hdr + n:]
        chunk = sock.recv(65536)
        if not chunk: sys.exit('connection closed')
        buf += chunk

def connect(port, dn, pw):
    sock = socket.create_connection(('127.0.0.1', port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.sendall(bind(1, dn, pw))
    tag, _ = read_message(sock, b'')
    assert tag == 0x61, 'bind response'
    return sock

def main():
    provider_port, consumer_port, dn, n, rate, bind_dn, pw = sys.argv[1:8]
    n, rate = int(n), float(rate)
    provider, consumer = connect(int(provider_port), bind_dn, pw), connect(int(consumer_port), bind_dn, pw)
    lags, msgid, tag_run = [], 2, str(time.time_ns())
    started = time.monotonic()
    for i in range(n):
        value = f'lag-{tag_run}-{i}'
        provider.sendall(modify(msgid, dn, value)); msgid += 1
        tag, _ = read_message(provider, b'')
        assert tag == 0x67, 'modify response'
        answered = time.monotonic()
        while True:
            consumer.sendall(base_search(msgid, dn, value)); msgid += 1
            buf, found = b'', False
            while True:
                tag, buf = read_message(consumer, buf)
                if tag == 0x64: found = True
                if tag == 0x65: break
            if found: break
            if time.monotonic() - answered > 60: sys.exit(f'change {i} not replicated within 60 s')
        lags.append((time.monotonic() - answered) * 1000)
        # Sustained rate: the next modify starts on schedule (or at once when behind).
        delay = started + (i + 1) / rate - time.monotonic()
        if delay > 0: time.sleep(delay)
    lags.sort()
    pick = lambda q: lags[min(len(lags) - 1, int(q * len(lags)))]
    print(f'changes={n} rate={rate}/s p50_ms={pick(0.50):.2f} p99_ms={pick(0.99):.2f} max_ms={lags[-1]:.2f}')

main()
