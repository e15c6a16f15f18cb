"""Shared plumbing: params, atomic IO, logging, tracking, Ray, DVC, services, CLI."""
