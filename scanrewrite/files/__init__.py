"""Files: the project root, its configuration, which files to process, and reading and writing them.

Sources stay bytes from the disk to the disk: the rewrite works on bytes, so a file's
encoding, byte-order mark, newlines and tabs come back exactly as they were.
"""

from scanrewrite.files._discovery import DEFAULT_EXCLUDES, SUFFIXES, Discovery, Excludes, is_notebook
from scanrewrite.files._io import FileError, Source, check_decodable, display_path, read_source, write_file
from scanrewrite.files._project import (
    DEFAULT_LINE_LENGTH,
    ROOT_MARKERS,
    find_project_root,
    find_pyproject,
    first_party_names,
    formatter_line_length,
    load_toml,
    read_config,
)

__all__ = [
    "DEFAULT_EXCLUDES",
    "DEFAULT_LINE_LENGTH",
    "ROOT_MARKERS",
    "SUFFIXES",
    "Discovery",
    "Excludes",
    "FileError",
    "Source",
    "check_decodable",
    "display_path",
    "find_project_root",
    "find_pyproject",
    "first_party_names",
    "formatter_line_length",
    "load_toml",
    "is_notebook",
    "read_config",
    "read_source",
    "write_file",
]
