#!/usr/bin/env python3
"""One connection, N searches one after another, each waiting for its SearchResultDone: the load for
counting a server's CPU per search (bench/search-cpu.sh). Usage: search-client.py PORT N eq|sub
(eq: (uid=uNNNNNNN) on `lmdir gen 20000` data; sub: (mail=*NNNNN*)). No dependencies: raw BER."""
import socket, sys

def length(n):
    if n < 0x80: return bytes([n])
    b = n.to_bytes((n.bit_length() + 7) // 8, 'big')
    return bytes([0x80 | len(b)]) + b
def tlv(tag, body): return bytes([tag]) + length(len(body)) + body
def integer(tag, v): return tlv(tag, v.to_bytes(max(1, (v.bit_length() + 8) // 8), 'big', signed=True))
def octets(s, tag=0x04): return tlv(tag, s.encode())

def search(msgid, base, filt, attrs=()):
    body = octets(base) + integer(0x0a, 2) + integer(0x0a, 0) + integer(0x02, 0) + integer(0x02, 0) \
        + tlv(0x01, b'\x00') + filt + tlv(0x30, b''.join(octets(a) for a in attrs))
    return tlv(0x30, integer(0x02, msgid) + tlv(0x63, body))

def eq(attr, value): return tlv(0xa3, octets(attr) + octets(value))
def sub_any(attr, piece): return tlv(0xa4, octets(attr) + tlv(0x30, octets(piece, 0x81)))

def read_message(sock, buf):
    while True:
        if len(buf) >= 2:
            first = buf[1]
            if first < 0x80: hdr, n = 2, first
            else:
                k = first & 0x7f
                if len(buf) >= 2 + k: hdr, n = 2 + k, int.from_bytes(buf[2:2 + k], 'big')
                else: hdr = None
            if hdr is not None and len(buf) >= hdr + n:
                return buf[:hdr + n], buf[hdr + n:]
        data = sock.recv(65536)
        if not data: raise SystemExit('closed')
        buf += data

port, n, kind = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
sock = socket.create_connection(('127.0.0.1', port))
buf = b''
entries = 0
for i in range(1, n + 1):
    k = (i * 7919) % 20000
    if kind == 'eq': f = eq('uid', 'u%07d' % k)
    else: f = sub_any('mail', '%05d' % (k % 100000))
    sock.sendall(search(i, 'dc=example,dc=com', f))
    while True:
        msg, buf = read_message(sock, buf)
        # op tag after the message id
        if b'\x65' in msg[:12] and msg[msg.index(b'\x02') + 2 + msg[msg.index(b'\x02') + 1]] == 0x65:
            break
        entries += 1
print('searches', n, 'entries', entries)
