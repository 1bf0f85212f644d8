"""Today's Sequences platform, served locally: deployments of the local account driven over the
direct-worker protocol (control plane on the gateway, data plane on a worker's own HTTPS port).

Needs the gateway extra plus ``sequence-base`` (the platform's wire contract) and
``cryptography`` (the worker's certificate). See docs/gateway.md, "The platform".
"""
