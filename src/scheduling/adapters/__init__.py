"""Adapters: the concrete implementations of ports. Only bootstrap wires them."""
