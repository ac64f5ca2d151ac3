"""Config values that become one component of a path: a run's, an experiment's or a study's name, a family, a
level, a tracker's project, entity and tags. One rule checks them all (:func:`check_path_component`), so no
value a config file or ``--set`` gives can make opct write outside the folder it names (``../../escaped``) or
into a hidden folder; a refused value is an error naming the file, the field and why (through pydantic's
field path, :func:`opct.config.files._format_validation_error`).
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator

_PATH_COMPONENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")

#: The rule in words, for messages.
PATH_COMPONENT_RULE = ("use letters, digits, '.', '_' and '-' (starting with a letter or digit; no '/', no '..', "
                       "no spaces)")


def check_path_component(value: str, what: str = "name") -> str:
    """``value`` when it can be one folder or file name inside the folder opct writes, else ValueError saying
    why: letters, digits, '.', '_' and '-' only, starting with a letter or digit, and no '..'."""
    if not isinstance(value, str) or not _PATH_COMPONENT.fullmatch(value) or ".." in value:
        raise ValueError(f"{value!r} is not a usable {what}: such values become folder names, so {PATH_COMPONENT_RULE}")
    return value


def check_folder_name(value: str) -> str:
    """``value`` when it can name one folder inside an output directory, else ValueError saying why.

    A run, experiment or study name becomes ``<output_dir>/<name>`` (:func:`check_path_component`), so the
    output never lands outside ``output_dir`` (``name: ../../etc``) or in a hidden folder.
    """
    try:
        return check_path_component(value)
    except ValueError:
        raise ValueError(
            f"{value!r} is not a usable name: it becomes a folder inside output_dir, so use letters, digits, '.', '_' "
            "and '-' (starting with a letter or digit; no '/', no '..'). To write elsewhere, set output_dir."
        ) from None


#: A name that becomes one folder inside ``output_dir`` (:func:`check_folder_name`).
FolderName = Annotated[str, AfterValidator(check_folder_name)]

#: Any other config value that becomes one component of a path (:func:`check_path_component`).
PathComponent = Annotated[str, AfterValidator(check_path_component)]
