"""Transactions: the transaction coordinator's pure core (coordinator.py), its records in
__transaction_state (records.py) and its IO shell (shell.py)."""
