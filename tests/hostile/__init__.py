"""Hostile input: cases written the way an attacker (or an operator on a bad day) would."""
