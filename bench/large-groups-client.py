#!/usr/bin/env python3
"""Large-group operations timed one by one on one connection per server, bound as the rootdn of
bench/common.sh, the servers alternating operation by operation (so a slow phase of a shared
machine lands on both), each operation waiting for its response. Raw BER, no dependencies.

Usage: large-groups-client.py gen PEOPLE > file.ldif
       large-groups-client.py time KIND REPS PEOPLE NAME:PORT [NAME:PORT ...]
       large-groups-client.py run KIND REPS PEOPLE PORT      (no timing: a callgrind load)

The data (gen): dc=example,dc=com, ou=People with PEOPLE people uid=uNNNNNNN plus OUTSIDERS
people uid=xNNNNNNN in no group, ou=Groups with cn=big naming every uNNNNNNN and 100 groups
cn=gNN of 100 members each (people 0..9999 in order); people carry their memberOf (slapadd
runs no overlay; lmdir's load computes the same values and keeps these).

Kinds: add (member add of outsider i to cn=big), delete (member delete of outsider i: run
after add), search ((member=uid=uK,...) under ou=Groups, 1.1), compare (member uK on cn=big),
memberof (base read of uK's memberOf), readgroup (base read of cn=big's member values).
`time` prints per server: NAME KIND median_ms min_ms max_ms over REPS."""
import socket, statistics, sys, time

SUFFIX = 'dc=example,dc=com'
ROOTDN, ROOTPW = 'cn=admin,dc=example,dc=com', 'secret'
BIG = 'cn=big,ou=Groups,' + SUFFIX
OUTSIDERS = 1000
SMALL_GROUPS, SMALL_SIZE = 100, 100

def person(k): return 'uid=u%07d,ou=People,%s' % (k, SUFFIX)
def outsider(k): return 'uid=x%07d,ou=People,%s' % (k, SUFFIX)
def small(g): return 'cn=g%02d,ou=Groups,%s' % (g, SUFFIX)

def gen(people):
    out = sys.stdout
    out.write('dn: %s\nobjectClass: top\nobjectClass: domain\ndc: example\n\n' % SUFFIX)
    for ou in ('People', 'Groups'):
        out.write('dn: ou=%s,%s\nobjectClass: organizationalUnit\nou: %s\n\n' % (ou, SUFFIX, ou))
    for k in range(people):
        groups = [BIG] + ([small(k // SMALL_SIZE)] if k < SMALL_GROUPS * SMALL_SIZE else [])
        out.write('dn: %s\nobjectClass: inetOrgPerson\nuid: u%07d\ncn: Person %d\nsn: %d\n' % (person(k), k, k, k))
        out.write(''.join('memberOf: %s\n' % g for g in groups) + '\n')
    for k in range(OUTSIDERS):
        out.write('dn: %s\nobjectClass: inetOrgPerson\nuid: x%07d\ncn: Outsider %d\nsn: %d\n\n' % (outsider(k), k, k, k))
    out.write('dn: %s\nobjectClass: groupOfNames\ncn: big\n' % BIG)
    for k in range(people):
        out.write('member: %s\n' % person(k))
    out.write('\n')
    for g in range(SMALL_GROUPS):
        out.write('dn: %s\nobjectClass: groupOfNames\ncn: g%02d\n' % (small(g), g))
        for k in range(g * SMALL_SIZE, min((g + 1) * SMALL_SIZE, people)):
            out.write('member: %s\n' % person(k))
        if g * SMALL_SIZE >= people:
            out.write('member: %s\n' % BIG)
        out.write('\n')

def length(n):
    if n < 0x80: return bytes([n])
    b = n.to_bytes((n.bit_length() + 7) // 8, 'big')
    return bytes([0x80 | len(b)]) + b
def tlv(tag, body): return bytes([tag]) + length(len(body)) + body
def integer(tag, v): return tlv(tag, v.to_bytes(max(1, (v.bit_length() + 8) // 8), 'big', signed=True))
def octets(s, tag=0x04): return tlv(tag, s.encode())
def message(msgid, op): return tlv(0x30, integer(0x02, msgid) + op)

def bind(msgid):
    return message(msgid, tlv(0x60, integer(0x02, 3) + octets(ROOTDN) + octets(ROOTPW, 0x80)))

def search(msgid, base, scope, filt, attrs):
    body = octets(base) + integer(0x0a, scope) + integer(0x0a, 0) + integer(0x02, 0) \
        + integer(0x02, 0) + tlv(0x01, b'\x00') + filt + tlv(0x30, b''.join(octets(a) for a in attrs))
    return message(msgid, tlv(0x63, body))

def modify(msgid, dn, operation, attr, value):
    change = tlv(0x30, integer(0x0a, operation) + tlv(0x30, octets(attr) + tlv(0x31, octets(value))))
    return message(msgid, tlv(0x66, octets(dn) + tlv(0x30, change)))

def compare(msgid, dn, attr, value):
    return message(msgid, tlv(0x6e, octets(dn) + tlv(0x30, octets(attr) + octets(value))))

def eq(attr, value): return tlv(0xa3, octets(attr) + octets(value))
def present(attr): return octets(attr, 0x87)

class Connection:
    def __init__(self, port):
        self.sock = socket.create_connection(('127.0.0.1', port))
        # A bytearray: appending is linear (bytes += bytes copies the whole buffer each time, which
        # cost ~300 ms of client time on a 45 MB entry, the same for both servers).
        self.buf = bytearray()
        self.msgid = 1
        self.call(bind, 0x61, (0,))

    def read_message(self):
        while True:
            if len(self.buf) >= 2:
                first = self.buf[1]
                hdr, n = (2, first) if first < 0x80 else (None, 0)
                if first >= 0x80:
                    k = first & 0x7f
                    if len(self.buf) >= 2 + k: hdr, n = 2 + k, int.from_bytes(self.buf[2:2 + k], 'big')
                if hdr is not None and len(self.buf) >= hdr + n:
                    msg = bytes(self.buf[:hdr + n])
                    del self.buf[:hdr + n]
                    return msg
            data = self.sock.recv(1 << 20)
            if not data: raise SystemExit('connection closed')
            self.buf += data

    def call(self, build, done, allowed, *args):
        """Sends one request, reads to its final response; returns (seconds, entries)."""
        self.msgid += 1
        start = time.perf_counter()
        self.sock.sendall(build(self.msgid, *args))
        entries = 0
        while True:
            msg = self.read_message()
            at = 2 + (msg[1] & 0x7f if msg[1] & 0x80 else 0)
            at += 2 + msg[at + 1]
            op = msg[at]
            if op == done:
                elapsed = time.perf_counter() - start
                at += 2 + (msg[at + 1] & 0x7f if msg[at + 1] & 0x80 else 0)
                code = msg[at + 2]
                if code not in allowed:
                    raise SystemExit('%s: result code %d' % (build.__name__, code))
                return elapsed, entries
            entries += 1

def operation(connection, kind, i, people):
    k = (i * 7919) % people
    if kind == 'add':
        return connection.call(modify, 0x67, (0,), BIG, 0, 'member', outsider(i))
    if kind == 'delete':
        return connection.call(modify, 0x67, (0,), BIG, 1, 'member', outsider(i))
    if kind == 'search':
        return connection.call(search, 0x65, (0,), 'ou=Groups,' + SUFFIX, 2, eq('member', person(k)), ['1.1'])
    if kind == 'compare':
        return connection.call(compare, 0x6f, (6,), BIG, 'member', person(k))
    if kind == 'memberof':
        return connection.call(search, 0x65, (0,), person(k), 0, present('objectClass'), ['memberOf'])
    if kind == 'readgroup':
        return connection.call(search, 0x65, (0,), BIG, 0, present('objectClass'), ['member'])
    raise SystemExit('unknown kind ' + kind)

def main():
    if sys.argv[1] == 'gen':
        return gen(int(sys.argv[2]))
    mode, kind, reps, people = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    if reps > OUTSIDERS: raise SystemExit('at most %d repetitions' % OUTSIDERS)
    servers = [arg.split(':') for arg in sys.argv[5:]] if mode == 'time' else [('server', sys.argv[5])]
    connections = [(name, Connection(int(port))) for name, port in servers]
    times = {name: [] for name, _ in servers}
    for i in range(reps):
        for name, connection in connections:
            elapsed, _ = operation(connection, kind, i, people)
            times[name].append(elapsed * 1000)
    if mode == 'time':
        for name, values in times.items():
            print('%s %s %.3f %.3f %.3f' % (name, kind, statistics.median(values), min(values), max(values)))

if __name__ == '__main__':
    main()
