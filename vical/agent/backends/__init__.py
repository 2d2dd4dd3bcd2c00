"""Agent backends, one module each, registered with :func:`vical.agent.base.register_agent`."""
