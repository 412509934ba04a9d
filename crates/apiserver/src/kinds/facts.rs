//! What kube-apiserver's registry decides per built-in resource, beyond what its type says:
//! short names and categories, its subresources, whether it tracks `metadata.generation`, what a
//! DELETE answers, and the fields a field selector may name.

/// The registry's facts about one built-in resource, built with `const` methods:
///
/// ```
/// use ctrlkit_apiserver::kinds::Facts;
///
/// const DEPLOYMENTS: Facts = Facts::new().short(&["deploy"]).in_all().status().scale().generation();
/// assert!(DEPLOYMENTS.scale && DEPLOYMENTS.generation && !DEPLOYMENTS.returns_deleted_object);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Facts {
    /// Short names for kubectl, e.g. `po`.
    pub short_names: &'static [&'static str],
    /// Categories, e.g. `all` (what `kubectl get all` lists).
    pub categories: &'static [&'static str],
    /// Whether it has a `status` subresource: then a write to the main resource keeps the stored
    /// status, and a write to `/status` changes only the status.
    pub status: bool,
    /// Whether it has a `scale` subresource over `spec.replicas`, `status.replicas` and
    /// `status.selector` (or `spec.selector`).
    pub scale: bool,
    /// Whether `metadata.generation` is set to 1 on create and bumped when the object changes
    /// outside its metadata (and status).
    pub generation: bool,
    /// Whether a DELETE that removes the object answers with the object rather than a `Status`.
    pub returns_deleted_object: bool,
    /// Whether a PUT to a missing object creates it.
    pub create_on_update: bool,
    /// Whether a PUT must carry the stored resourceVersion (no unconditional update).
    pub requires_resource_version: bool,
    /// The fields a field selector may name besides `metadata.name` and `metadata.namespace`.
    pub selectable_fields: &'static [Field],
    /// Whether it is only created, answered and never stored (a review).
    pub create_only: bool,
}

/// A field a field selector may name: its label, the dotted JSON path it reads, and the value it
/// has when the object leaves that path out.
pub type Field = (&'static str, &'static str, &'static str);

impl Facts {
    /// No short names or categories, no subresources, no generation, a `Status` for a DELETE.
    pub const fn new() -> Self {
        Self {
            short_names: &[],
            categories: &[],
            status: false,
            scale: false,
            generation: false,
            returns_deleted_object: false,
            create_on_update: false,
            requires_resource_version: false,
            selectable_fields: &[],
            create_only: false,
        }
    }

    /// Only created and answered, never stored.
    pub const fn create_only(self) -> Self {
        Self {
            create_only: true,
            ..self
        }
    }

    /// With these short names.
    pub const fn short(self, short_names: &'static [&'static str]) -> Self {
        Self {
            short_names,
            ..self
        }
    }

    /// In the `all` category.
    pub const fn in_all(self) -> Self {
        Self {
            categories: &["all"],
            ..self
        }
    }

    /// In these categories.
    pub const fn categories(self, categories: &'static [&'static str]) -> Self {
        Self { categories, ..self }
    }

    /// With a `status` subresource.
    pub const fn status(self) -> Self {
        Self {
            status: true,
            ..self
        }
    }

    /// With a `scale` subresource.
    pub const fn scale(self) -> Self {
        Self {
            scale: true,
            ..self
        }
    }

    /// Tracking `metadata.generation`.
    pub const fn generation(self) -> Self {
        Self {
            generation: true,
            ..self
        }
    }

    /// Answering a DELETE with the deleted object.
    pub const fn returns_deleted_object(self) -> Self {
        Self {
            returns_deleted_object: true,
            ..self
        }
    }

    /// Creating on a PUT to a missing object, which must then carry a resourceVersion on update.
    pub const fn create_on_update(self) -> Self {
        Self {
            create_on_update: true,
            ..self
        }
    }

    /// Requiring a resourceVersion on every PUT.
    pub const fn requires_resource_version(self) -> Self {
        Self {
            requires_resource_version: true,
            ..self
        }
    }

    /// With these selectable fields.
    pub const fn fields(self, selectable_fields: &'static [Field]) -> Self {
        Self {
            selectable_fields,
            ..self
        }
    }
}

impl Default for Facts {
    fn default() -> Self {
        Self::new()
    }
}
