"""Agents: the closed-loop protocol and the backends that answer it."""

from vical.agent.base import Agent, Decision, EpisodeContext, Observation, get_agent, register_agent

__all__ = ["Agent", "Decision", "EpisodeContext", "Observation", "get_agent", "register_agent"]
