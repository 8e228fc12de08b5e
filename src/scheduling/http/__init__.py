"""The HTTP control plane (FastAPI on uvicorn): ``create_app(plane)``."""
