"""Act: pyinfra task files included by deploy.py, one concern each."""
