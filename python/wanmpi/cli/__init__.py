"""`wanmpi`, the one command: main.py builds its parser from one module per
subcommand (testbed.py, run.py, link.py, plot.py, doctor.py, demo.py,
bench.py, sim.py), each declaring its arguments beside its handler; options.py holds
what several share: --topology and the types that parse option values.
"""
