"""Prometheus metrics with Kafka's meanings (docs/monitoring.md).

  stats.py       the plain counters the data path bumps (no Prometheus import)
  collectors.py  metric families built from a node's state at scrape time
  exporter.py    the `metrics.listeners` HTTP endpoint (prometheus_client)
"""
