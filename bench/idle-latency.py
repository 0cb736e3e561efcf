#!/usr/bin/env python3
"""Latency of one request after the machine sat idle, against the same request back to back:
what a VM's wake-ups add to an operation that follows a pause (bench/large-groups.sh's alternating
runs: each lmdir operation follows one of slapd's, up to seconds long). Uses the
large-groups client's raw BER. Run it against a server of that data and the protocol-only responder
(crates/server/examples/protocol_only.rs), nothing else running:

  idle-latency.py PROTOCOL_ONLY_PORT LMDIR_PORT PEOPLE

Prints, per pause (0, 50 ms, 300 ms), the median of 15 root DSE reads on each server and of 16
member adds and deletes (outsiders 900..907) on the big group of lmdir."""
import importlib.util, os, statistics, sys, time

spec = importlib.util.spec_from_file_location(
    'large_groups_client',
    os.path.join(os.path.dirname(os.path.abspath(__file__)), 'large-groups-client.py'))
client = importlib.util.module_from_spec(spec)
spec.loader.exec_module(client)
Connection, operation, present, search = client.Connection, client.operation, client.present, client.search
PAUSES = (0, 0.05, 0.3)

def timed(request, count, pause):
    times = []
    for i in range(count):
        time.sleep(pause)
        times.append(request(i) * 1000)
    return statistics.median(times)

def root_dse(connection):
    return lambda i: connection.call(search, 0x65, (0,), '', 0, present('objectClass'), ['1.1'])[0]

def member_change(connection, people):
    def change(i):
        kind = 'add' if i % 2 == 0 else 'delete'
        return operation(connection, kind, 900 + i // 2, people)[0]
    return change

def main():
    protocol_only, lmdir, people = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    for name, port in (('protocol-only', protocol_only), ('lmdir', lmdir)):
        connection = Connection(port)
        for pause in PAUSES:
            print('%-14s root DSE read, pause %.2f s: median %.3f ms'
                  % (name, pause, timed(root_dse(connection), 15, pause)))
    connection = Connection(lmdir)
    for pause in PAUSES:
        print('%-14s member add/delete, pause %.2f s: median %.3f ms'
              % ('lmdir', pause, timed(member_change(connection, people), 16, pause)))

if __name__ == '__main__':
    main()
