import os

from hypothesis import settings

# CI gets a fixed, derandomized profile so a run is reproducible; locally, more examples.
settings.register_profile("ci", max_examples=25, derandomize=True, deadline=None, print_blob=True)
settings.register_profile("dev", max_examples=50, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else os.environ.get("HYPOTHESIS_PROFILE", "dev"))
