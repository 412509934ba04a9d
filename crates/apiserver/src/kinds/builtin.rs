//! The built-in kinds: every resource of the Kubernetes version the build's k8s-openapi enables,
//! in the version kube-apiserver prefers for it (stable over beta over alpha), each with its
//! type's group, version, kind, plural and scope (from its `Resource` impl), its typed decoding,
//! its defaults and the registry's [`Facts`].
//!
//! Which types exist depends on the enabled version (1.33 to 1.37): entries that not every
//! version has are gated with k8s-openapi's `k8s_if_*` macros.

use std::any::TypeId;
use std::borrow::Cow;
use std::fmt;
use std::sync::{LazyLock, OnceLock};

use k8s_openapi::schemars::{JsonSchema, Schema, SchemaGenerator};
use k8s_openapi::{NamespaceResourceScope, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::defaults;
use super::facts::{Facts, Field};
use super::typed::{self, TypeError, UnknownFields};

/// One built-in resource.
pub struct BuiltinType {
    /// The API group; empty for the core group.
    pub group: &'static str,
    /// The version served.
    pub version: &'static str,
    /// The kind of its objects.
    pub kind: &'static str,
    /// The plural name used in URLs.
    pub plural: &'static str,
    /// Whether its objects live in namespaces.
    pub namespaced: bool,
    /// The registry's facts about it.
    pub facts: Facts,
    decode: fn(&mut Value, UnknownFields) -> Result<Vec<String>, TypeError>,
    schema: fn(&mut SchemaGenerator) -> Schema,
    schema_name: fn() -> Cow<'static, str>,
    empty_status: OnceLock<Value>,
}

impl BuiltinType {
    fn of<T>(
        facts: Facts,
        decode: fn(&mut Value, UnknownFields) -> Result<Vec<String>, TypeError>,
    ) -> Self
    where
        T: Resource + JsonSchema + 'static,
    {
        Self {
            group: T::GROUP,
            version: T::VERSION,
            kind: T::KIND,
            plural: T::URL_PATH_SEGMENT,
            namespaced: TypeId::of::<T::Scope>() == TypeId::of::<NamespaceResourceScope>(),
            facts,
            decode,
            schema: |generator| generator.subschema_for::<T>(),
            schema_name: T::schema_name,
            empty_status: OnceLock::new(),
        }
    }

    /// Reads `object` as this kind's type, applies its defaults, and writes it back over
    /// `object`: what the type does not declare is dropped, and its paths returned as `unknown`
    /// says. A value of the wrong type leaves `object` as it was.
    pub fn decode(
        &self,
        object: &mut Value,
        unknown: UnknownFields,
    ) -> Result<Vec<String>, TypeError> {
        (self.decode)(object, unknown)
    }

    /// The status of a new object, as Go writes an empty status struct: with the fields its
    /// type always has (a ReplicationController's `replicas: 0`). Decoded once.
    pub fn empty_status(&self) -> &Value {
        self.empty_status.get_or_init(|| {
            let mut empty = serde_json::json!({"metadata": {}, "status": {}});
            self.decode(&mut empty, UnknownFields::Drop)
                .ok()
                .and_then(|_| empty.get("status").cloned())
                .unwrap_or_else(|| Value::Object(serde_json::Map::new()))
        })
    }

    /// Its type's schema in `generator` (a `$ref` to its definition).
    pub fn schema(&self, generator: &mut SchemaGenerator) -> Schema {
        (self.schema)(generator)
    }

    /// The name of its type's definition, e.g. `io.k8s.api.core.v1.Pod`.
    pub fn schema_name(&self) -> Cow<'static, str> {
        (self.schema_name)()
    }
}

impl fmt::Debug for BuiltinType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BuiltinType")
            .field("group", &self.group)
            .field("version", &self.version)
            .field("kind", &self.kind)
            .field("plural", &self.plural)
            .finish_non_exhaustive()
    }
}

impl PartialEq for BuiltinType {
    fn eq(&self, other: &Self) -> bool {
        (self.group, self.version, self.plural) == (other.group, other.version, other.plural)
    }
}

impl Eq for BuiltinType {}

fn typed<T>(facts: Facts) -> BuiltinType
where
    T: Resource + JsonSchema + DeserializeOwned + Serialize + 'static,
{
    BuiltinType::of::<T>(facts, decode_with_defaults::<T>)
}

/// Decoding with the defaults kube-apiserver gives the type (see [`defaults::apply`]).
fn decode_with_defaults<T>(
    object: &mut Value,
    unknown: UnknownFields,
) -> Result<Vec<String>, TypeError>
where
    T: DeserializeOwned + Serialize + 'static,
{
    typed::decode::<T>(object, unknown, |typed| defaults::apply(typed))
}

/// A field selected by its own path, empty when absent.
const fn same(label: &'static str) -> Field {
    (label, label, "")
}

const POD_FIELDS: &[Field] = &[
    same("spec.nodeName"),
    same("spec.restartPolicy"),
    same("spec.schedulerName"),
    same("spec.serviceAccountName"),
    ("spec.hostNetwork", "spec.hostNetwork", "false"),
    same("status.phase"),
    same("status.podIP"),
    same("status.nominatedNodeName"),
];
const EVENT_FIELDS: &[Field] = &[
    same("involvedObject.kind"),
    same("involvedObject.namespace"),
    same("involvedObject.name"),
    same("involvedObject.uid"),
    same("involvedObject.apiVersion"),
    same("involvedObject.resourceVersion"),
    same("involvedObject.fieldPath"),
    same("reason"),
    same("reportingComponent"),
    ("source", "source.component", ""),
    same("type"),
];
const NAMESPACE_FIELDS: &[Field] = &[same("status.phase")];
const SECRET_FIELDS: &[Field] = &[same("type")];
const SERVICE_FIELDS: &[Field] = &[same("spec.clusterIP"), same("spec.type")];
const SIGNER_FIELDS: &[Field] = &[same("spec.signerName")];
const POD_CERTIFICATE_FIELDS: &[Field] = &[
    same("spec.signerName"),
    same("spec.podName"),
    same("spec.nodeName"),
];
const RESOURCE_SLICE_FIELDS: &[Field] = &[same("spec.nodeName"), same("spec.driver")];
const EVENTS_V1_FIELDS: &[Field] = &[
    same("regarding.kind"),
    same("regarding.namespace"),
    same("regarding.name"),
    same("regarding.uid"),
    same("regarding.apiVersion"),
    same("regarding.resourceVersion"),
    same("regarding.fieldPath"),
    same("reason"),
    same("reportingController"),
    same("type"),
];

/// Every built-in resource, in discovery order.
pub fn builtin_types() -> &'static [BuiltinType] {
    static TYPES: LazyLock<Vec<BuiltinType>> = LazyLock::new(all);
    &TYPES
}

#[allow(clippy::too_many_lines)]
fn all() -> Vec<BuiltinType> {
    use k8s_openapi::api;
    let mut types = Vec::new();
    macro_rules! serve {
        ($ty:ty, $facts:expr) => {
            types.push(typed::<$ty>($facts))
        };
    }
    let workload = Facts::new().in_all().status().generation();

    // The core group.
    serve!(api::core::v1::ConfigMap, Facts::new().short(&["cm"]));
    serve!(
        api::core::v1::Endpoints,
        Facts::new().short(&["ep"]).create_on_update()
    );
    serve!(
        api::core::v1::Event,
        Facts::new()
            .short(&["ev"])
            .create_on_update()
            .fields(EVENT_FIELDS)
    );
    serve!(
        api::core::v1::LimitRange,
        Facts::new().short(&["limits"]).create_on_update()
    );
    serve!(
        api::core::v1::Namespace,
        Facts::new()
            .short(&["ns"])
            .status()
            .returns_deleted_object()
            .fields(NAMESPACE_FIELDS)
    );
    serve!(
        api::core::v1::Node,
        Facts::new().short(&["no"]).status().fields(&[(
            "spec.unschedulable",
            "spec.unschedulable",
            "false"
        )])
    );
    serve!(
        api::core::v1::PersistentVolumeClaim,
        Facts::new()
            .short(&["pvc"])
            .status()
            .returns_deleted_object()
    );
    serve!(
        api::core::v1::PersistentVolume,
        Facts::new()
            .short(&["pv"])
            .status()
            .returns_deleted_object()
    );
    serve!(
        api::core::v1::Pod,
        Facts::new()
            .short(&["po"])
            .in_all()
            .status()
            .generation()
            .returns_deleted_object()
            .fields(POD_FIELDS)
    );
    serve!(
        api::core::v1::PodTemplate,
        Facts::new().generation().returns_deleted_object()
    );
    serve!(
        api::core::v1::ReplicationController,
        Facts::new()
            .short(&["rc"])
            .in_all()
            .status()
            .scale()
            .generation()
            .fields(&[("status.replicas", "status.replicas", "0")])
    );
    serve!(
        api::core::v1::ResourceQuota,
        Facts::new()
            .short(&["quota"])
            .status()
            .returns_deleted_object()
    );
    serve!(api::core::v1::Secret, Facts::new().fields(SECRET_FIELDS));
    serve!(
        api::core::v1::ServiceAccount,
        Facts::new().short(&["sa"]).returns_deleted_object()
    );
    serve!(
        api::core::v1::Service,
        Facts::new()
            .short(&["svc"])
            .in_all()
            .status()
            .returns_deleted_object()
            .create_on_update()
            .fields(SERVICE_FIELDS)
    );
    serve!(api::core::v1::ComponentStatus, Facts::new().short(&["cs"]));

    // apps, batch, autoscaling, policy.
    serve!(api::apps::v1::ControllerRevision, Facts::new());
    serve!(api::apps::v1::DaemonSet, workload.short(&["ds"]));
    serve!(
        api::apps::v1::Deployment,
        workload.short(&["deploy"]).scale()
    );
    serve!(api::apps::v1::ReplicaSet, workload.short(&["rs"]).scale());
    serve!(api::apps::v1::StatefulSet, workload.short(&["sts"]).scale());
    serve!(api::batch::v1::CronJob, workload.short(&["cj"]));
    serve!(
        api::batch::v1::Job,
        workload.fields(&[("status.successful", "status.succeeded", "0")])
    );
    serve!(
        api::autoscaling::v2::HorizontalPodAutoscaler,
        Facts::new().short(&["hpa"]).in_all().status()
    );
    serve!(
        api::policy::v1::PodDisruptionBudget,
        Facts::new()
            .short(&["pdb"])
            .status()
            .generation()
            .requires_resource_version()
    );

    // Networking and discovery.
    serve!(api::discovery::v1::EndpointSlice, Facts::new().generation());
    serve!(
        api::networking::v1::Ingress,
        Facts::new().short(&["ing"]).status().generation()
    );
    serve!(api::networking::v1::IngressClass, Facts::new().generation());
    serve!(
        api::networking::v1::NetworkPolicy,
        Facts::new().short(&["netpol"]).generation()
    );
    serve!(api::networking::v1::IPAddress, Facts::new().short(&["ip"]));
    serve!(api::networking::v1::ServiceCIDR, Facts::new().status());

    // Events, leases, certificates.
    serve!(
        api::events::v1::Event,
        Facts::new()
            .short(&["ev"])
            .create_on_update()
            .fields(EVENTS_V1_FIELDS)
    );
    serve!(
        api::coordination::v1::Lease,
        Facts::new().create_on_update().requires_resource_version()
    );
    serve!(
        api::coordination::v1beta1::LeaseCandidate,
        Facts::new().create_on_update().requires_resource_version()
    );
    serve!(
        api::certificates::v1::CertificateSigningRequest,
        Facts::new().short(&["csr"]).status().fields(SIGNER_FIELDS)
    );

    // Authorization, scheduling, storage, node, flow control, admission.
    let rbac = Facts::new().create_on_update();
    serve!(api::rbac::v1::ClusterRole, rbac);
    serve!(api::rbac::v1::ClusterRoleBinding, rbac);
    serve!(api::rbac::v1::Role, rbac);
    serve!(api::rbac::v1::RoleBinding, rbac);
    serve!(
        api::scheduling::v1::PriorityClass,
        Facts::new().short(&["pc"]).generation()
    );
    serve!(
        api::node::v1::RuntimeClass,
        Facts::new().create_on_update().requires_resource_version()
    );
    let storage = Facts::new()
        .returns_deleted_object()
        .requires_resource_version();
    serve!(api::storage::v1::CSIDriver, storage);
    serve!(api::storage::v1::CSINode, storage);
    serve!(
        api::storage::v1::CSIStorageCapacity,
        Facts::new().requires_resource_version()
    );
    serve!(
        api::storage::v1::StorageClass,
        Facts::new().short(&["sc"]).returns_deleted_object()
    );
    serve!(api::storage::v1::VolumeAttachment, storage.status());
    serve!(
        api::flowcontrol::v1::FlowSchema,
        Facts::new().status().generation()
    );
    serve!(
        api::flowcontrol::v1::PriorityLevelConfiguration,
        Facts::new().status().generation()
    );
    let admission = Facts::new()
        .categories(&["api-extensions"])
        .generation()
        .requires_resource_version();
    serve!(
        api::admissionregistration::v1::MutatingWebhookConfiguration,
        admission
    );
    serve!(
        api::admissionregistration::v1::ValidatingWebhookConfiguration,
        admission
    );
    serve!(
        api::admissionregistration::v1::ValidatingAdmissionPolicy,
        admission.status()
    );
    serve!(
        api::admissionregistration::v1::ValidatingAdmissionPolicyBinding,
        admission
    );
    serve!(
        api::apiserverinternal::v1alpha1::StorageVersion,
        Facts::new().status().requires_resource_version()
    );

    // Resources whose preferred version differs between the Kubernetes versions k8s-openapi has.
    let dra = Facts::new().returns_deleted_object();
    k8s_openapi::k8s_if_le_1_33! {
        serve!(api::admissionregistration::v1alpha1::MutatingAdmissionPolicy, admission);
        serve!(api::admissionregistration::v1alpha1::MutatingAdmissionPolicyBinding, admission);
        serve!(api::resource::v1beta2::DeviceClass, dra.generation());
        serve!(api::resource::v1beta2::ResourceClaim, dra.status());
        serve!(api::resource::v1beta2::ResourceClaimTemplate, dra);
        serve!(api::resource::v1beta2::ResourceSlice, dra.generation().fields(RESOURCE_SLICE_FIELDS));
        serve!(api::storage::v1beta1::VolumeAttributesClass, Facts::new().short(&["vac"]).returns_deleted_object());
    }
    k8s_openapi::k8s_if_ge_1_34! {
        serve!(api::resource::v1::DeviceClass, dra.generation());
        serve!(api::resource::v1::ResourceClaim, dra.status());
        serve!(api::resource::v1::ResourceClaimTemplate, dra);
        serve!(api::resource::v1::ResourceSlice, dra.generation().fields(RESOURCE_SLICE_FIELDS));
        serve!(api::storage::v1::VolumeAttributesClass, Facts::new().short(&["vac"]).returns_deleted_object());
    }
    k8s_openapi::k8s_if_le_1_34! {
        serve!(api::storagemigration::v1alpha1::StorageVersionMigration, Facts::new().status().requires_resource_version());
    }
    k8s_openapi::k8s_if_le_1_35! {
        serve!(api::resource::v1alpha3::DeviceTaintRule, dra.generation());
    }
    k8s_openapi::k8s_if_le_1_36! {
        serve!(api::certificates::v1beta1::ClusterTrustBundle, Facts::new().requires_resource_version().fields(SIGNER_FIELDS));
    }
    k8s_openapi::k8s_if_1_34! {
        serve!(api::certificates::v1alpha1::PodCertificateRequest, Facts::new().status().requires_resource_version().fields(POD_CERTIFICATE_FIELDS));
    }
    k8s_openapi::k8s_if_1_34! {
        serve!(api::admissionregistration::v1beta1::MutatingAdmissionPolicy, admission);
        serve!(api::admissionregistration::v1beta1::MutatingAdmissionPolicyBinding, admission);
    }
    k8s_openapi::k8s_if_1_35! {
        serve!(api::admissionregistration::v1beta1::MutatingAdmissionPolicy, admission);
        serve!(api::admissionregistration::v1beta1::MutatingAdmissionPolicyBinding, admission);
        serve!(api::scheduling::v1alpha1::Workload, Facts::new());
    }
    k8s_openapi::k8s_if_ge_1_35! {
        k8s_openapi::k8s_if_le_1_36! {
            serve!(api::certificates::v1beta1::PodCertificateRequest, Facts::new().status().requires_resource_version().fields(POD_CERTIFICATE_FIELDS));
            serve!(api::storagemigration::v1beta1::StorageVersionMigration, Facts::new().status().requires_resource_version());
        }
    }
    k8s_openapi::k8s_if_1_36! {
        serve!(api::resource::v1beta2::DeviceTaintRule, dra.status().generation());
        serve!(api::scheduling::v1alpha2::PodGroup, Facts::new().status());
        serve!(api::scheduling::v1alpha2::Workload, Facts::new());
    }
    k8s_openapi::k8s_if_ge_1_36! {
        serve!(api::admissionregistration::v1::MutatingAdmissionPolicy, admission);
        serve!(api::admissionregistration::v1::MutatingAdmissionPolicyBinding, admission);
        serve!(api::resource::v1alpha3::ResourcePoolStatusRequest, dra.status().requires_resource_version());
    }
    k8s_openapi::k8s_if_ge_1_37! {
        serve!(api::certificates::v1::ClusterTrustBundle, Facts::new().requires_resource_version().fields(SIGNER_FIELDS));
        serve!(api::certificates::v1::PodCertificateRequest, Facts::new().status().requires_resource_version().fields(POD_CERTIFICATE_FIELDS));
        serve!(api::lifecycle::v1alpha1::Eviction, Facts::new().status());
        serve!(api::lifecycle::v1alpha1::EvictionRequest, Facts::new().status());
        serve!(api::resource::v1::DeviceTaintRule, dra.status().generation());
        serve!(api::scheduling::v1alpha3::CompositePodGroup, Facts::new().status());
        serve!(api::scheduling::v1beta1::PodGroup, Facts::new().status());
        serve!(api::scheduling::v1beta1::Workload, Facts::new());
        serve!(api::storagemigration::v1::StorageVersionMigration, Facts::new().status().requires_resource_version());
    }

    // The reviews: answered, never stored.
    let review = Facts::new().create_only();
    serve!(api::authentication::v1::TokenReview, review);
    serve!(api::authentication::v1::SelfSubjectReview, review);
    serve!(api::authorization::v1::SubjectAccessReview, review);
    serve!(api::authorization::v1::SelfSubjectAccessReview, review);
    serve!(api::authorization::v1::LocalSubjectAccessReview, review);
    serve!(api::authorization::v1::SelfSubjectRulesReview, review);

    // Extensions of the API itself.
    serve!(
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
        Facts::new()
            .short(&["crd", "crds"])
            .categories(&["api-extensions"])
            .status()
            .generation()
            .requires_resource_version()
    );
    serve!(
        k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService,
        Facts::new()
            .categories(&["api-extensions"])
            .status()
            .requires_resource_version()
    );
    types
}
