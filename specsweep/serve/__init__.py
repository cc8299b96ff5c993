"""Stage benchmark_server: one configuration's server, from launch to teardown, and its client.

``job``: the server job (launch, readiness, warmup, measurement, teardown).
``server``: a supervised process. ``container``: the docker run argv and
teardown. ``client`` + ``payloads``: the streaming benchmark client.
``provenance``: what was really in effect, read inside the server (stdlib only).
"""
