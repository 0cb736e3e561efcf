#!/usr/bin/env python3
"""Member changes on the big group of bench/large-groups.sh's data, each after a pause: run it
under `perf stat -e task-clock,page-faults,context-switches -p <server pid>` to see the CPU a
change costs back to back (pause 0) against after an idle pause (issue 22: on this VM a change
after 50 ms idle uses twice the CPU). Alternates adds and deletes of outsiders 900.. and prints
the median latency.

  pause-changes.py PORT PAUSE_SECONDS COUNT PEOPLE
"""
import importlib.util, os, statistics, sys, time

spec = importlib.util.spec_from_file_location(
    'large_groups_client',
    os.path.join(os.path.dirname(os.path.abspath(__file__)), 'large-groups-client.py'))
client = importlib.util.module_from_spec(spec)
spec.loader.exec_module(client)

port, pause, count, people = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
connection = client.Connection(port)
times = []
for i in range(count):
    time.sleep(pause)
    kind = 'add' if i % 2 == 0 else 'delete'
    times.append(client.operation(connection, kind, 900 + i // 2, people)[0] * 1000)
print('pause %.2f s: median %.3f ms over %d changes' % (pause, statistics.median(times), count))
