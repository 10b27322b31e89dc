"""Test doubles that speak real protocols: the vendor servers the feeds fetch from."""
