"""The built-in Kubernetes types our resources embed: Job and Pod templates.

A CronJob carries a batch/v1 ``JobTemplateSpec`` and a ConfigDeployment a core/v1
``PodTemplateSpec``. controller-gen would copy the whole upstream schema into the CRD;
we type the parts people write and that ``kubectl explain`` should describe (containers,
their command, env, ports, resources and mounts, the common pod fields, the Job knobs),
so mistakes there are rejected at ``kubectl apply`` time with the field's name, rather
than as a FailedCreate event every schedule tick.

Sub-objects that are large, rarely written in a template and fully validated by the API
server when the Job or Deployment is created (affinity, security contexts, probes,
lifecycle hooks, exotic volume sources...) are ``PreservedObject``s or ``OpenModel``s:
kept exactly as written, never pruned. Each such field says why beside it. Fields this
module does not list at all are pruned by the API server on create, as for any CRD, and
``kubectl apply`` (strict field validation) reports them as unknown.

Defaults are deliberately absent: the Job and Deployment API servers default their own
fields when the controller creates them, so the template stays as the user wrote it.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Self

from pydantic import ConfigDict, Field, StringConstraints, model_validator

from cronjob_operator.api.meta import (
    Int32,
    Int64,
    KubeModel,
    NonNegativeInt32,
    NonNegativeInt64,
    OpenModel,
    PortNumber,
    PositiveInt64,
    PreservedObject,
    Quantity,
    TemplateMeta,
)

__all__ = [
    "CompletionMode",
    "ConfigMapEnvSource",
    "ConfigMapVolumeSource",
    "Container",
    "ContainerPort",
    "DNSPolicy",
    "EmptyDirVolumeSource",
    "EnvFromSource",
    "EnvVar",
    "JobSpec",
    "JobTemplateSpec",
    "KeyToPath",
    "LabelSelector",
    "LabelSelectorRequirement",
    "LocalObjectReference",
    "MountPropagationMode",
    "PersistentVolumeClaimVolumeSource",
    "PodReplacementPolicy",
    "PodSpec",
    "PodTemplateSpec",
    "Protocol",
    "PullPolicy",
    "ResourceRequirements",
    "RestartPolicy",
    "SecretEnvSource",
    "SecretVolumeSource",
    "TaintEffect",
    "TerminationMessagePolicy",
    "Toleration",
    "TolerationOperator",
    "Volume",
    "VolumeMount",
]

NonEmptyStr = Annotated[str, StringConstraints(min_length=1)]


class RestartPolicy(StrEnum):
    """Restart policy for all containers within the pod."""

    ALWAYS = "Always"
    ON_FAILURE = "OnFailure"
    NEVER = "Never"


class PullPolicy(StrEnum):
    """Image pull policy."""

    ALWAYS = "Always"
    NEVER = "Never"
    IF_NOT_PRESENT = "IfNotPresent"


class Protocol(StrEnum):
    """Protocol for port. Must be UDP, TCP, or SCTP."""

    TCP = "TCP"
    UDP = "UDP"
    SCTP = "SCTP"


class TerminationMessagePolicy(StrEnum):
    """Indicate how the termination message should be populated."""

    FILE = "File"
    FALLBACK_TO_LOGS_ON_ERROR = "FallbackToLogsOnError"


class MountPropagationMode(StrEnum):
    """How mounts are propagated from the host to container and the other way around."""

    NONE = "None"
    HOST_TO_CONTAINER = "HostToContainer"
    BIDIRECTIONAL = "Bidirectional"


class DNSPolicy(StrEnum):
    """DNS policy for the pod."""

    CLUSTER_FIRST_WITH_HOST_NET = "ClusterFirstWithHostNet"
    CLUSTER_FIRST = "ClusterFirst"
    DEFAULT = "Default"
    NONE = "None"


class TolerationOperator(StrEnum):
    """Operator represents a key's relationship to the value."""

    EXISTS = "Exists"
    EQUAL = "Equal"


class TaintEffect(StrEnum):
    """The taint effect to match."""

    NO_SCHEDULE = "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    NO_EXECUTE = "NoExecute"


class CompletionMode(StrEnum):
    """How Pod completions are tracked: NonIndexed or Indexed."""

    NON_INDEXED = "NonIndexed"
    INDEXED = "Indexed"


class PodReplacementPolicy(StrEnum):
    """When to create replacement Pods: TerminatingOrFailed or Failed."""

    TERMINATING_OR_FAILED = "TerminatingOrFailed"
    FAILED = "Failed"


class LocalObjectReference(KubeModel):
    """A reference to an object by name in the same namespace."""

    name: str | None = None
    """Name of the referent."""


class EnvVar(KubeModel):
    """An environment variable present in a Container."""

    name: NonEmptyStr
    """Name of the environment variable."""
    value: str | None = None
    """Variable references $(VAR_NAME) are expanded using the previously defined
    environment variables in the container and any service environment variables."""
    # Preserved: fieldRef, resourceFieldRef (with an int-or-string divisor), configMapKeyRef,
    # secretKeyRef and fileKeyRef; the Pod API validates them when the Job or Deployment is
    # created, and typing all of them would double this schema for a rarely used field.
    value_from: PreservedObject | None = None
    """Source for the environment variable's value (fieldRef, resourceFieldRef,
    configMapKeyRef, secretKeyRef). Cannot be used if value is not empty."""


class ConfigMapEnvSource(KubeModel):
    """Selects a ConfigMap to populate the environment variables with."""

    name: str | None = None
    """Name of the ConfigMap."""
    optional: bool | None = None
    """Specify whether the ConfigMap must be defined."""


class SecretEnvSource(KubeModel):
    """Selects a Secret to populate the environment variables with."""

    name: str | None = None
    """Name of the Secret."""
    optional: bool | None = None
    """Specify whether the Secret must be defined."""


class EnvFromSource(KubeModel):
    """A source to populate environment variables in the container from."""

    prefix: str | None = None
    """Optional text to prepend to the name of each environment variable."""
    config_map_ref: ConfigMapEnvSource | None = None
    """The ConfigMap to select from."""
    secret_ref: SecretEnvSource | None = None
    """The Secret to select from."""


class ContainerPort(KubeModel):
    """A network port in a single container."""

    name: str | None = None
    """If specified, an IANA_SVC_NAME, unique within the pod, that services can refer to."""
    container_port: PortNumber
    """Number of port to expose on the pod's IP address."""
    protocol: Protocol | None = None
    """Protocol for port. Must be UDP, TCP, or SCTP. Defaults to "TCP"."""
    host_port: PortNumber | None = None
    """Number of port to expose on the host. Most containers do not need this."""
    host_ip: str | None = Field(default=None, alias="hostIP")
    """What host IP to bind the external port to."""


class ResourceRequirements(KubeModel):
    """Compute resource requirements."""

    limits: dict[str, Quantity] | None = None
    """The maximum amount of compute resources allowed (cpu, memory, ...)."""
    requests: dict[str, Quantity] | None = None
    """The minimum amount of compute resources required (cpu, memory, ...)."""
    # Preserved: dynamic resource allocation claims; validated by the Pod API.
    claims: list[PreservedObject] | None = None
    """The names of resources, defined in spec.resourceClaims, used by this container."""


class VolumeMount(KubeModel):
    """A mounting of a Volume within a container."""

    name: NonEmptyStr
    """This must match the Name of a Volume."""
    mount_path: NonEmptyStr
    """Path within the container at which the volume should be mounted."""
    read_only: bool | None = None
    """Mounted read-only if true, read-write otherwise (false or unspecified)."""
    sub_path: str | None = None
    """Path within the volume from which the container's volume should be mounted."""
    sub_path_expr: str | None = None
    """Expanded path within the volume from which the container's volume should be
    mounted, with $(VAR_NAME) references expanded from the container's environment."""
    mount_propagation: MountPropagationMode | None = None
    """Determines how mounts are propagated from the host to container and the other way
    around."""
    recursive_read_only: str | None = None
    """Specifies whether read-only mounts should be handled recursively."""


class Container(KubeModel):
    """A single application container that you want to run within a pod."""

    name: NonEmptyStr
    """Name of the container specified as a DNS_LABEL. Each container in a pod must have a
    unique name."""
    image: str | None = None
    """Container image name."""
    command: list[str] | None = None
    """Entrypoint array. Not executed within a shell. The image's ENTRYPOINT is used if
    this is not provided."""
    args: list[str] | None = None
    """Arguments to the entrypoint. The image's CMD is used if this is not provided."""
    working_dir: str | None = None
    """Container's working directory."""
    ports: list[ContainerPort] | None = None
    """List of ports to expose from the container."""
    env_from: list[EnvFromSource] | None = None
    """List of sources to populate environment variables in the container."""
    env: list[EnvVar] | None = None
    """List of environment variables to set in the container."""
    resources: ResourceRequirements | None = None
    """Compute Resources required by this container."""
    # Preserved: in-place resize policies; validated by the Pod API.
    resize_policy: list[PreservedObject] | None = None
    """Resources resize policy for the container."""
    restart_policy: str | None = None
    """Restart behavior of an init container ("Always" makes it a sidecar)."""
    volume_mounts: list[VolumeMount] | None = None
    """Pod volumes to mount into the container's filesystem."""
    # Preserved: raw block devices; rare in templates, validated by the Pod API.
    volume_devices: list[PreservedObject] | None = None
    """volumeDevices is the list of block devices to be used by the container."""
    # Probes and lifecycle hooks are preserved: their handlers (exec, httpGet, tcpSocket,
    # grpc, sleep) hold int-or-string ports and nested objects; the Pod API validates them
    # when the Job or Deployment is created, and kubectl explain pod.spec describes them.
    liveness_probe: PreservedObject | None = None
    """Periodic probe of container liveness. Container will be restarted if the probe
    fails."""
    readiness_probe: PreservedObject | None = None
    """Periodic probe of container service readiness."""
    startup_probe: PreservedObject | None = None
    """StartupProbe indicates that the Pod has successfully initialized."""
    lifecycle: PreservedObject | None = None
    """Actions that the management system should take in response to container lifecycle
    events."""
    termination_message_path: str | None = None
    """Path at which the file to which the container's termination message will be written
    is mounted into the container's filesystem."""
    termination_message_policy: TerminationMessagePolicy | None = None
    """Indicate how the termination message should be populated."""
    image_pull_policy: PullPolicy | None = None
    """Image pull policy. One of Always, Never, IfNotPresent."""
    # Preserved: capabilities, seccomp/apparmor/selinux profiles, user ids...; security
    # settings are checked by the Pod API and admission (Pod Security) on create.
    security_context: PreservedObject | None = None
    """SecurityContext defines the security options the container should be run with."""
    stdin: bool | None = None
    """Whether this container should allocate a buffer for stdin in the container
    runtime."""
    stdin_once: bool | None = None
    """Whether the container runtime should close the stdin channel after it has been
    opened by a single attach."""
    tty: bool | None = None
    """Whether this container should allocate a TTY for itself."""


class KeyToPath(KubeModel):
    """Maps a string key to a path within a volume."""

    key: str
    """The key to project."""
    path: str
    """The relative path of the file to map the key to."""
    mode: Int32 | None = None
    """Mode bits used to set permissions on this file."""


class ConfigMapVolumeSource(KubeModel):
    """Adapts a ConfigMap into a volume."""

    name: str | None = None
    """Name of the ConfigMap."""
    items: list[KeyToPath] | None = None
    """If unspecified, each key-value pair in the Data field of the referenced ConfigMap
    will be projected into the volume as a file whose name is the key."""
    default_mode: Int32 | None = None
    """Mode bits used to set permissions on created files by default."""
    optional: bool | None = None
    """Specify whether the ConfigMap or its keys must be defined."""


class SecretVolumeSource(KubeModel):
    """Adapts a Secret into a volume."""

    secret_name: str | None = None
    """Name of the secret in the pod's namespace to use."""
    items: list[KeyToPath] | None = None
    """If unspecified, each key-value pair in the Data field of the referenced Secret will
    be projected into the volume as a file whose name is the key."""
    default_mode: Int32 | None = None
    """Mode bits used to set permissions on created files by default."""
    optional: bool | None = None
    """Specify whether the Secret or its keys must be defined."""


class EmptyDirVolumeSource(KubeModel):
    """A temporary directory that shares a pod's lifetime."""

    medium: str | None = None
    """What type of storage medium should back this directory ("" or "Memory")."""
    size_limit: Quantity | None = None
    """Total amount of local storage required for this EmptyDir volume."""


class PersistentVolumeClaimVolumeSource(KubeModel):
    """References the user's PVC in the same namespace."""

    claim_name: NonEmptyStr
    """The name of a PersistentVolumeClaim in the same namespace as the pod using this
    volume."""
    read_only: bool | None = None
    """Will force the ReadOnly setting in VolumeMounts."""


class Volume(OpenModel):
    """A named volume in a pod that may be accessed by any container in the pod.

    The common sources are described; any other volume source (projected, downwardAPI,
    csi, ephemeral, hostPath, nfs, image...) is kept as written and validated when the
    pod is created."""

    # An OpenModel: the schema types the four common sources and preserves the other
    # twenty-odd (each with its own nested schema) rather than copying them all.
    name: NonEmptyStr
    """Name of the volume. Must be a DNS_LABEL and unique within the pod."""
    config_map: ConfigMapVolumeSource | None = None
    """A ConfigMap that should populate this volume."""
    secret: SecretVolumeSource | None = None
    """A Secret that should populate this volume."""
    empty_dir: EmptyDirVolumeSource | None = None
    """A temporary directory that shares a pod's lifetime."""
    persistent_volume_claim: PersistentVolumeClaimVolumeSource | None = None
    """A reference to a PersistentVolumeClaim in the same namespace."""


class Toleration(KubeModel):
    """The pod this Toleration is attached to tolerates any taint that matches the triple
    <key,value,effect> using the matching operator <operator>."""

    key: str | None = None
    """The taint key that the toleration applies to. Empty means match all taint keys."""
    operator: TolerationOperator | None = None
    """A key's relationship to the value. Valid operators are Exists and Equal."""
    value: str | None = None
    """The taint value the toleration matches to."""
    effect: TaintEffect | None = None
    """The taint effect to match. Empty means match all taint effects."""
    toleration_seconds: Int64 | None = None
    """The period of time the toleration (which must be of effect NoExecute) tolerates the
    taint."""


class PodSpec(KubeModel):
    """Specification of the desired behavior of the pod."""

    volumes: list[Volume] | None = None
    """List of volumes that can be mounted by containers belonging to the pod."""
    init_containers: list[Container] | None = None
    """List of initialization containers belonging to the pod, run in order before the
    containers are started."""
    containers: Annotated[list[Container], Field(min_length=1)]
    """List of containers belonging to the pod. There must be at least one."""
    restart_policy: RestartPolicy | None = None
    """Restart policy for all containers within the pod. One of Always, OnFailure, Never.
    A Job's pods must use OnFailure or Never; a Deployment's pods Always."""
    termination_grace_period_seconds: NonNegativeInt64 | None = None
    """Duration in seconds the pod needs to terminate gracefully."""
    active_deadline_seconds: PositiveInt64 | None = None
    """Duration in seconds the pod may be active on the node before the system will
    actively try to mark it failed and kill associated containers."""
    dns_policy: DNSPolicy | None = None
    """Set DNS policy for the pod. Defaults to "ClusterFirst"."""
    node_selector: dict[str, str] | None = None
    """A selector which must be true for the pod to fit on a node."""
    service_account_name: str | None = None
    """Name of the ServiceAccount to use to run this pod."""
    automount_service_account_token: bool | None = None
    """Indicates whether a service account token should be automatically mounted."""
    node_name: str | None = None
    """A request to schedule this pod onto a specific node."""
    host_network: bool | None = None
    """Host networking requested for this pod."""
    host_pid: bool | None = Field(default=None, alias="hostPID")
    """Use the host's pid namespace."""
    host_ipc: bool | None = Field(default=None, alias="hostIPC")
    """Use the host's ipc namespace."""
    share_process_namespace: bool | None = None
    """Share a single process namespace between all of the containers in a pod."""
    # Preserved: fsGroup, runAsUser, seccomp, sysctls...; checked by the Pod API and Pod
    # Security admission when the pod is created.
    security_context: PreservedObject | None = None
    """SecurityContext holds pod-level security attributes and common container
    settings."""
    image_pull_secrets: list[LocalObjectReference] | None = None
    """References to secrets in the same namespace to use for pulling any of the images."""
    hostname: str | None = None
    """Specifies the hostname of the Pod."""
    subdomain: str | None = None
    """If specified, the fully qualified Pod hostname will be
    "<hostname>.<subdomain>.<pod namespace>.svc.<cluster domain>"."""
    # Preserved: node/pod (anti-)affinity is a deep tree of selectors and weighted terms
    # that the scheduler's API validation checks in full.
    affinity: PreservedObject | None = None
    """If specified, the pod's scheduling constraints."""
    scheduler_name: str | None = None
    """If specified, the pod will be dispatched by specified scheduler."""
    tolerations: list[Toleration] | None = None
    """If specified, the pod's tolerations."""
    # Preserved: rare in templates; each is validated by the Pod API on create.
    host_aliases: list[PreservedObject] | None = None
    """Optional list of hosts and IPs that will be injected into the pod's hosts file."""
    priority_class_name: str | None = None
    """If specified, indicates the pod's priority."""
    priority: Int32 | None = None
    """The priority value. Usually set by admission from priorityClassName."""
    dns_config: PreservedObject | None = None
    """Specifies the DNS parameters of a pod."""
    readiness_gates: list[PreservedObject] | None = None
    """If specified, all readiness gates will be evaluated for pod readiness."""
    runtime_class_name: str | None = None
    """The RuntimeClass object which should be used to run this pod."""
    enable_service_links: bool | None = None
    """Indicates whether information about services should be injected into pod's
    environment variables."""
    preemption_policy: str | None = None
    """Policy for preempting pods with lower priority. One of Never,
    PreemptLowerPriority."""
    overhead: dict[str, Quantity] | None = None
    """The resource overhead associated with running a pod for a given RuntimeClass."""
    topology_spread_constraints: list[PreservedObject] | None = None
    """How a group of pods ought to spread across topology domains."""
    set_hostname_as_fqdn: bool | None = Field(default=None, alias="setHostnameAsFQDN")
    """If true the pod's hostname will be configured as the pod's FQDN."""
    os: PreservedObject | None = None
    """Specifies the OS of the containers in the pod."""
    host_users: bool | None = None
    """Use the host's user namespace."""
    scheduling_gates: list[PreservedObject] | None = None
    """If specified, the pod is kept from being scheduled until every gate is removed."""
    resource_claims: list[PreservedObject] | None = None
    """Resource claims that must be allocated before the pod can start."""
    resources: ResourceRequirements | None = None
    """The total amount of CPU and memory resources required by all containers in the
    pod."""


class PodTemplateSpec(KubeModel):
    """Describes the data a pod should have when created from a template."""

    metadata: TemplateMeta | None = None
    """Labels and annotations put on the pods."""
    spec: PodSpec
    """Specification of the desired behavior of the pod."""


class LabelSelectorRequirement(KubeModel):
    """A selector that contains values, a key, and an operator that relates the key and
    values."""

    key: str
    """The label key that the selector applies to."""
    operator: str
    """Represents a key's relationship to a set of values: In, NotIn, Exists and
    DoesNotExist."""
    values: list[str] | None = None
    """An array of string values."""


class LabelSelector(KubeModel):
    """A label query over a set of resources."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-map-type": "atomic"})

    match_labels: dict[str, str] | None = None
    """A map of {key,value} pairs, each equivalent to an element of matchExpressions with
    operator In."""
    match_expressions: list[LabelSelectorRequirement] | None = None
    """A list of label selector requirements. The requirements are ANDed."""


_JOB_RESTART_POLICIES = (RestartPolicy.ON_FAILURE, RestartPolicy.NEVER)
_JOB_RESTART_MESSAGE = "a Job's pods must set restartPolicy OnFailure or Never"


class JobSpec(KubeModel):
    """Specification of the desired behavior of a job."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "has(self.template.spec.restartPolicy) && "
                    "self.template.spec.restartPolicy in ['OnFailure', 'Never']",
                    "message": _JOB_RESTART_MESSAGE,
                    "fieldPath": ".template.spec.restartPolicy",
                }
            ]
        }
    )

    parallelism: NonNegativeInt32 | None = None
    """The maximum desired number of pods the job should run at any given time."""
    completions: NonNegativeInt32 | None = None
    """The desired number of successfully finished pods the job should be run with."""
    active_deadline_seconds: PositiveInt64 | None = None
    """The duration in seconds relative to the startTime that the job may be continuously
    active before the system tries to terminate it."""
    # Preserved: a list of rules with nested action/onExitCodes/onPodConditions; the Job
    # API validates it (it also depends on restartPolicy) when the Job is created.
    pod_failure_policy: PreservedObject | None = None
    """Specifies the policy of handling failed pods."""
    # Preserved: same reasoning as podFailurePolicy.
    success_policy: PreservedObject | None = None
    """Specifies the policy when the Job can be declared as succeeded."""
    backoff_limit: NonNegativeInt32 | None = None
    """Specifies the number of retries before marking this job failed. Defaults to 6."""
    backoff_limit_per_index: NonNegativeInt32 | None = None
    """Specifies the limit for the number of retries within an index before marking this
    index as failed. Requires completionMode Indexed."""
    max_failed_indexes: NonNegativeInt32 | None = None
    """Specifies the maximal number of failed indexes before marking the Job as failed,
    when backoffLimitPerIndex is set."""
    selector: LabelSelector | None = None
    """A label query over pods that should match the pod count. Normally, the system sets
    this field for you."""
    manual_selector: bool | None = None
    """manualSelector controls generation of pod labels and pod selectors. Leave unset
    unless you are certain what you are doing."""
    template: PodTemplateSpec
    """Describes the pod that will be created when executing a job. The only allowed
    template.spec.restartPolicy values are "Never" or "OnFailure"."""
    ttl_seconds_after_finished: NonNegativeInt32 | None = None
    """Limits the lifetime of a Job that has finished execution (either Complete or
    Failed). Note that the CronJob's history limits also delete finished Jobs."""
    completion_mode: CompletionMode | None = None
    """Specifies how Pod completions are tracked. NonIndexed (default) or Indexed."""
    suspend: bool | None = None
    """Specifies whether the Job controller should create Pods or not."""
    pod_replacement_policy: PodReplacementPolicy | None = None
    """Specifies when to create replacement Pods: TerminatingOrFailed or Failed."""
    managed_by: str | None = None
    """The controller that manages the Job; unset means the built-in Job controller."""

    @model_validator(mode="after")
    def _pods_never_restart_always(self) -> Self:
        if self.template.spec.restart_policy not in _JOB_RESTART_POLICIES:
            raise ValueError(_JOB_RESTART_MESSAGE)
        return self


class JobTemplateSpec(KubeModel):
    """Describes the data a Job should have when created from a template."""

    metadata: TemplateMeta | None = None
    """Labels and annotations copied to every Job created from this template."""
    spec: JobSpec
    """Specification of the desired behavior of the job."""
