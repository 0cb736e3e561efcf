#!/usr/bin/env python3
"""Member changes on the big group of bench/large-groups.sh's data, each after a pause: run it
under `perf stat -e task-clock,page-faults,context-switches -p <server pid>` to see the CPU a
change costs back to back (pause 0) against after an idle pause (issue 22: on this VM a change
after 50 ms idle uses twice the CPU). The changes and their timing are bench/idle-latency.py's
(adds and deletes of outsiders 900..); prints the median latency.

  pause-changes.py PORT PAUSE_SECONDS COUNT PEOPLE
"""
import importlib.util, os, sys

spec = importlib.util.spec_from_file_location(
    'idle_latency', os.path.join(os.path.dirname(os.path.abspath(__file__)), 'idle-latency.py'))
idle = importlib.util.module_from_spec(spec)
spec.loader.exec_module(idle)

port, pause, count, people = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
change = idle.member_change(idle.Connection(port), people)
print('pause %.2f s: median %.3f ms over %d changes' % (pause, idle.timed(change, count, pause), count))
