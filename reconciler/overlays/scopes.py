"""Which kinds the Kubernetes API serves cluster-scoped, as kustomize knows them.

Input: an API group and a kind. Output: whether objects of that kind have no namespace.
Pure.
"""

from __future__ import annotations

# Kinds the Kubernetes API serves cluster-scoped (kustomize knows them from its built-in
# OpenAPI data; it treats every other kind, custom kinds included, as namespaced).
_CLUSTER_SCOPED = frozenset(
    {
        ("", "Namespace"),
        ("", "Node"),
        ("", "PersistentVolume"),
        ("", "ComponentStatus"),
        ("rbac.authorization.k8s.io", "ClusterRole"),
        ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
        ("apiextensions.k8s.io", "CustomResourceDefinition"),
        ("apiregistration.k8s.io", "APIService"),
        ("storage.k8s.io", "StorageClass"),
        ("storage.k8s.io", "CSIDriver"),
        ("storage.k8s.io", "CSINode"),
        ("storage.k8s.io", "VolumeAttachment"),
        ("scheduling.k8s.io", "PriorityClass"),
        ("networking.k8s.io", "IngressClass"),
        ("node.k8s.io", "RuntimeClass"),
        ("policy", "PodSecurityPolicy"),
        ("certificates.k8s.io", "CertificateSigningRequest"),
        ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"),
        ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"),
        ("flowcontrol.apiserver.k8s.io", "FlowSchema"),
        ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"),
    }
)


def is_cluster_scoped(group: str, kind: str) -> bool:
    return (group, kind) in _CLUSTER_SCOPED
