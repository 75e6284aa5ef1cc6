"""Automations, their deliveries and attempts, and score syncs."""
