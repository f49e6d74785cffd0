"""`python -m scanrewrite.tune`: the `scanrewrite-tune` command."""

from scanrewrite.tune._command import main

if __name__ == "__main__":
    main(prog_name="scanrewrite-tune")
