"""Prefect flows only: the `skillgate` entry flow and one sub-flow per stage.

Importing this package applies the embedded-default Prefect settings before Prefect itself loads.
"""

from tasks.settings import configure_prefect_env

configure_prefect_env()
