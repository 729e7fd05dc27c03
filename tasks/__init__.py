"""Prefect tasks only: thin wrappers that call a pure skillgate_core function and return paths + digests."""

from tasks.settings import configure_prefect_env

configure_prefect_env()
