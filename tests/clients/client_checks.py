"""What the client scripts of tests/clients/ share: a check that ends the run
with the message of the first one that fails (exit 1), and the skip (exit 77)
when the client packages are not installed (scripts/client_venv.sh)."""
import sys


def check(cond, what):
    if not cond:
        print(f"FAILED: {what}")
        sys.exit(1)


def skip(error):
    print(f"skipped: {error}")
    sys.exit(77)
