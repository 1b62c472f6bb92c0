"""The tools wing: ``gateway bench``, ``gateway matrix`` and the harness they share.

* :mod:`gateway.tools.harness`: child processes and ports, throw-away certificates, the one
  gateway launcher, the one Prometheus text reader and the one peer-process library;
* :mod:`gateway.tools.bench`: latency and throughput side by side with libzmq, nng and
  ``zmq.proxy``;
* :mod:`gateway.tools.matrix`: the interop matrix (the ``[matrix]`` extra, on Spark).

The core never imports this package, not even lazily (``tests/test_imports.py`` walks the import
graph of every core module): the tools add their ``gateway`` subcommands through the
``gateway.commands`` entry-point group (:mod:`gateway.tools.commands`), which ``gateway.cli``
reads by group name. The tools import the core and the built-in plugins freely.
"""
