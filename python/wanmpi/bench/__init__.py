"""The benchmarks: one module per `wanmpi bench` subcommand, beside what they
share: the runner of cases, their result format and the figures.

  runner.py  cases on the testbed each needs, progress, failures, environment
  plot.py    figures from measurements, in the style of the papers
  suite.py coll.py pacing.py relay.py rbudp.py report.py
             `wanmpi bench suite`, `coll`, `pacing`, `relay`, `rbudp`, `report`
  links.py   `wanmpi bench net`: every WAN link against its configuration
  wanem.py   `wanmpi bench emulator`: the emulator itself
"""
