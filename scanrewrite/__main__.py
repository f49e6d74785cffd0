"""`python -m scanrewrite`: the same command as the `scanrewrite` script."""

from scanrewrite.cli import main

# Guarded: worker processes started by spawn or forkserver import this module again.
if __name__ == "__main__":
    main(prog_name="scanrewrite")
