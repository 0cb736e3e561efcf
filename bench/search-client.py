#!/usr/bin/env python3
"""One connection, N operations one after another, each waiting for its response: the load for
counting a server's CPU per operation (bench/search-cpu.sh, bench/search-instructions.sh).
Usage: search-client.py PORT N eq|sub|subinit|bind|authsearch|scan|modify|add [PEOPLE]
(eq: (uid=uNNNNNNN) on `lmdir gen PEOPLE` data, PEOPLE 20000 unless given; sub: (mail=*NNNNN*);
subinit: (mail=uNNNNNNN@*), the shape bench/serve-vs-openldap.sh's searchrate sends;
bind: a simple bind as uid=uNNNNNNN,ou=People with the generated password; authsearch: the
search half of UnboundID authrate, (uid=uNNNNNNN) on a connection bound as the rootdn of
bench/common.sh, asking for no attributes (1.1); scan: (objectClass=*) over the whole suffix;
modify: as the rootdn, replace the description of uid=uNNNNNNN; add: as the rootdn, add a new
inetOrgPerson under ou=People, named by this process and the operation's number).
Other searches are anonymous and ask for every attribute. No dependencies: raw BER."""
import os, socket, sys

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

def bind(msgid, dn, password):
    body = integer(0x02, 3) + octets(dn) + octets(password, 0x80)
    return tlv(0x30, integer(0x02, msgid) + tlv(0x60, body))

def attribute(name, *values):
    return tlv(0x30, octets(name) + tlv(0x31, b''.join(octets(v) for v in values)))

def modify(msgid, dn, name, value):
    change = tlv(0x30, integer(0x0a, 2) + attribute(name, value))
    return tlv(0x30, integer(0x02, msgid) + tlv(0x66, octets(dn) + tlv(0x30, change)))

def add(msgid, dn, attributes):
    body = octets(dn) + tlv(0x30, b''.join(attribute(n, *v) for n, v in attributes))
    return tlv(0x30, integer(0x02, msgid) + tlv(0x68, body))

def present(attr): return octets(attr, 0x87)
def eq(attr, value): return tlv(0xa3, octets(attr) + octets(value))
def sub_any(attr, piece): return tlv(0xa4, octets(attr) + tlv(0x30, octets(piece, 0x81)))
def sub_initial(attr, piece): return tlv(0xa4, octets(attr) + tlv(0x30, octets(piece, 0x80)))

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
people = int(sys.argv[4]) if len(sys.argv) > 4 else 20000
sock = socket.create_connection(('127.0.0.1', port))
buf = b''
entries = 0
if kind in ('authsearch', 'modify', 'add', 'eqrate'):
    # message ID n + 1: not reused by the searches (1..n)
    sock.sendall(bind(n + 1, 'cn=admin,dc=example,dc=com', 'secret'))
    msg, buf = read_message(sock, buf)
    at = 2 + (msg[1] & 0x7f if msg[1] & 0x80 else 0)
    at += 2 + msg[at + 1]
    at += 2 + (msg[at + 1] & 0x7f if msg[at + 1] & 0x80 else 0)
    if msg[at] != 0x0a or msg[at + 2] != 0:
        raise SystemExit('rootdn bind failed')
for i in range(1, n + 1):
    k = (i * 7919) % people
    if kind == 'bind':
        sock.sendall(bind(i, 'uid=u%07d,ou=People,dc=example,dc=com' % k, 'password'))
        done = 0x61
    elif kind == 'modify':
        sock.sendall(modify(i, 'uid=u%07d,ou=People,dc=example,dc=com' % k, 'description',
                            'changed by run %d, operation %d' % (os.getpid(), i)))
        done = 0x67
    elif kind == 'add':
        uid = 'b%d-%d' % (os.getpid(), i)
        sock.sendall(add(i, 'uid=%s,ou=People,dc=example,dc=com' % uid, [
            ('objectClass', ['top', 'person', 'organizationalPerson', 'inetOrgPerson']),
            ('uid', [uid]), ('cn', ['Bench Person %d' % i]), ('sn', ['Person']),
            ('givenName', ['Bench']), ('mail', ['%s@example.com' % uid]),
            ('telephoneNumber', ['+1 555 %07d' % i]), ('title', ['Engineer']),
            ('description', ['Added by the instruction benchmark'])]))
        done = 0x69
    else:
        attrs = ()
        if kind == 'eq': f = eq('uid', 'u%07d' % k)
        elif kind in ('authsearch', 'modify', 'add'): f, attrs = eq('uid', 'u%07d' % k), ('1.1',)
        elif kind == 'scan': f = present('objectClass')
        elif kind == 'subinit': f = sub_initial('mail', 'u%07d@' % k)
        else: f = sub_any('mail', '%05d' % (k % 100000))
        base = 'dc=example,dc=com'
        if kind == 'eqrate':
            # What `searchrate` of bench/serve-vs-openldap.sh sends: bound as the rootdn, under
            # ou=People, only cn asked for.
            f, attrs, base = eq('uid', 'u%07d' % k), ('cn',), 'ou=People,dc=example,dc=com'
        sock.sendall(search(i, base, f, attrs))
        done = 0x65
    while True:
        msg, buf = read_message(sock, buf)
        # skip the outer header and the message id: the op's tag, then its length, then (for a
        # result) the resultCode ENUMERATED
        at = 2 + (msg[1] & 0x7f if msg[1] & 0x80 else 0)
        at += 2 + msg[at + 1]
        op = msg[at]
        if op == done:
            at += 2 + (msg[at + 1] & 0x7f if msg[at + 1] & 0x80 else 0)
            if msg[at] == 0x0a and msg[at + 2] != 0:
                raise SystemExit('operation %d: result code %d' % (i, msg[at + 2]))
            break
        entries += 1
print('operations', n, 'entries', entries)
