"""What a step file writes: the numbers of its differentiated steps, for `real_suites.py` to
compare before and after the rewrite (copied beside the step file into the project's tree)."""

from __future__ import annotations

import json
import os

import jax
import numpy as np


def record(name: str, losses: list, tree: object) -> None:
    """Add `losses` and every inexact leaf of `tree` (the trained parameters), flattened, under
    `name` to the JSON file that `SCANREWRITE_STEP_OUT` names (nothing where it is unset)."""
    path = os.environ.get("SCANREWRITE_STEP_OUT")
    if not path:
        return
    leaves = [np.ravel(np.asarray(leaf)) for leaf in jax.tree_util.tree_leaves(tree)
              if np.issubdtype(np.asarray(leaf).dtype, np.inexact)]
    found = {}
    if os.path.exists(path):
        with open(path) as file:
            found = json.load(file)
    found[name] = {"losses": [float(v) for v in losses],
                   "params": np.concatenate(leaves).astype(float).tolist() if leaves else []}
    with open(path, "w") as file:
        json.dump(found, file)
