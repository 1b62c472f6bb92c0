"""The harness the bench, the matrix and the interop suites share (one copy of each):

* :mod:`~gateway.tools.harness.procs`: ports, URLs, the child environment, :class:`Proc` (a
  child speaking lines, every wait bounded), :func:`kill_proc`;
* :mod:`~gateway.tools.harness.gateway`: the one gateway launcher (READY lines read with
  ``gateway.supervisor.parse_ready``, the codec of the line the supervisor writes);
* :mod:`~gateway.tools.harness.prometheus`: the one Prometheus text reader
  (``prometheus_client.parser``);
* :mod:`~gateway.tools.harness.peers`: the one peer library (a socket of any implementation,
  in this process or as a child process), and the suites' simple server threads;
* :mod:`~gateway.tools.harness.certs` and :mod:`~gateway.tools.harness.security`: throw-away
  TLS certificates, CURVE keys and PLAIN passwords, and each role's settings.
"""
