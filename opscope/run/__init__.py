"""The run stage: the target table, compiling with IREE (cached), the runtime, the
instrumented model (inject + compile + load, with the parity gate), `opscope-compile`,
and the same sketches computed on the host with numpy.
"""
