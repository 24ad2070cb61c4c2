"""`python -m honestscale`: the honestscale command, as the installed script runs it."""

from honestscale.cli import main

if __name__ == "__main__":  # not when a worker process (report/_copies.py) imports the parent's main module
    main()
