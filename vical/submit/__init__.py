"""Signed results bundles, replay verification and the leaderboard."""
