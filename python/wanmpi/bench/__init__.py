"""The benchmarks: one module per `wanmpi bench` subcommand, beside what they
share.

  cases.py       a run's cases and the testbed (TopologySpec) each one needs
  runner.py      runs the cases: testbeds up and back, delays, progress, failures
  job_output.py  one MPI job of a case: its output, its JSON lines, why it failed
  results.py     the one result format, and what a run prints at its end
  plot.py        figures from measurements, in the style of the papers
  suite.py coll.py pacing.py relay.py rbudp.py vpn.py report.py
                 `wanmpi bench suite`, `coll`, `pacing`, `relay`, `rbudp`, `vpn`, `report`
  links.py       `wanmpi bench net`: every WAN link against its configuration
  wanem.py       `wanmpi bench emulator`: the emulator itself, measured by
                 wanem_parts.py and reported by wanem_report.py
"""
