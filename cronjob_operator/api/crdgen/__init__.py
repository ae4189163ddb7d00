"""CRD generation: this project's controller-gen, one concept per module.

``crds`` assembles each kind's versions into one CustomResourceDefinition and the
conversion webhook patches; ``schema`` makes pydantic's JSON Schema of a model
structural, as the API server requires; ``rendering`` writes the stable YAML committed
under ``config/crd`` and names the files; ``command`` is ``python -m
cronjob_operator.api.crdgen`` (``--check`` fails when a committed file is stale; a unit
test does the same check). The names below are the package's public interface.
"""

from cronjob_operator.api.crdgen.command import DEFAULT_OUT, main
from cronjob_operator.api.crdgen.crds import (
    RESOURCES,
    conversion_patch,
    generate_crd,
    generate_crds,
    kind_versions,
    service_client_config,
    webhook_patches,
)
from cronjob_operator.api.crdgen.rendering import (
    crd_file_name,
    patch_file_name,
    render_patch_yaml,
    render_yaml,
)
from cronjob_operator.api.crdgen.schema import SchemaError, openapi_schema

__all__ = [
    "DEFAULT_OUT",
    "RESOURCES",
    "SchemaError",
    "conversion_patch",
    "crd_file_name",
    "generate_crd",
    "generate_crds",
    "kind_versions",
    "main",
    "openapi_schema",
    "patch_file_name",
    "render_patch_yaml",
    "render_yaml",
    "service_client_config",
    "webhook_patches",
]
