//! `ctrlkit new`: a controller project of one's own, ready to build, test and deploy.
//!
//! The project is made from the templates beside this file. Its custom resource type,
//! `template/resource.rs`, is also compiled here, so the CRD manifest the project starts with is
//! generated from the very type it gets (renamed as the source is), and the project's own test
//! keeps the two equal from then on.

use std::path::{Path, PathBuf};

use kube::CustomResourceExt;

#[path = "template/resource.rs"]
mod resource;

/// Where the new project gets ctrlkit from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CtrlkitSource {
    /// This checkout's `crates/ctrlkit` (the ctrlkit the command was built from).
    Path(PathBuf),
    /// A published version.
    Version(String),
}

/// What `ctrlkit new` makes.
#[derive(Debug, Clone)]
pub struct NewOptions {
    /// The project's (and the controller's) name: lowercase letters, digits and `-`.
    pub name: String,
    /// The directory to create; `./<name>` by default.
    pub dir: PathBuf,
    /// The custom resource's kind (`Widget`).
    pub kind: String,
    /// Its API group (`example.com`).
    pub group: String,
    /// The namespace the manifests deploy the controller to.
    pub namespace: String,
    /// Where ctrlkit comes from.
    pub ctrlkit: CtrlkitSource,
}

/// Why the project could not be made.
#[derive(Debug, thiserror::Error)]
pub enum NewError {
    /// A name, kind or group that cannot be used.
    #[error("{0}")]
    Invalid(String),
    /// The directory exists.
    #[error("{0} exists already")]
    Exists(PathBuf),
    /// Writing a file failed.
    #[error("writing {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The CRD could not be written as YAML.
    #[error("generating the CRD: {0}")]
    Crd(String),
}

const FILES: [(&str, &str); 14] = [
    ("Cargo.toml", include_str!("template/Cargo.toml.txt")),
    ("README.md", include_str!("template/README.md.txt")),
    ("Dockerfile", include_str!("template/Dockerfile.txt")),
    ("src/lib.rs", include_str!("template/lib.rs.txt")),
    ("src/resource.rs", include_str!("template/resource.rs")),
    (
        "src/reconciler.rs",
        include_str!("template/reconciler.rs.txt"),
    ),
    ("src/main.rs", include_str!("template/main.rs.txt")),
    ("src/manager.rs", include_str!("template/manager.rs.txt")),
    ("src/bin/crdgen.rs", include_str!("template/crdgen.rs.txt")),
    (
        "tests/reconcile.rs",
        include_str!("template/test_reconcile.rs.txt"),
    ),
    (
        "tests/manifests.rs",
        include_str!("template/test_manifests.rs.txt"),
    ),
    (
        "manifests/00-namespace.yaml",
        include_str!("template/namespace.yaml.txt"),
    ),
    (
        "manifests/rbac.yaml",
        include_str!("template/rbac.yaml.txt"),
    ),
    (
        "manifests/deployment.yaml",
        include_str!("template/deployment.yaml.txt"),
    ),
];

/// The template type's names, replaced in the resource's source and in its CRD.
const TEMPLATE_KIND: &str = "Widget";
const TEMPLATE_GROUP: &str = "example.com";

fn check(options: &NewOptions) -> Result<(), NewError> {
    let name = &options.name;
    let name_ok = name.len() <= 63
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !name_ok {
        return Err(NewError::Invalid(format!(
            "the name {name:?} must be lowercase letters, digits and '-', starting with a letter (it names the crate, the controller and its Kubernetes objects)"
        )));
    }
    let kind = &options.kind;
    let kind_ok = kind.starts_with(|c: char| c.is_ascii_uppercase())
        && kind.chars().all(|c| c.is_ascii_alphanumeric())
        && kind.len() <= 62;
    if !kind_ok {
        return Err(NewError::Invalid(format!(
            "--kind {kind:?} must be an UpperCamelCase name of letters and digits"
        )));
    }
    let group = &options.group;
    let group_ok = group.contains('.')
        && group.len() <= 253
        && group.split('.').all(|part| {
            !part.is_empty()
                && part.starts_with(|c: char| c.is_ascii_alphanumeric())
                && part.ends_with(|c: char| c.is_ascii_alphanumeric())
                && part
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        });
    if !group_ok {
        return Err(NewError::Invalid(format!(
            "--group {group:?} must be a lowercase DNS name with a dot (example.com)"
        )));
    }
    crate::namespace_flag(&options.namespace).map_err(NewError::Invalid)?;
    if let CtrlkitSource::Version(version) = &options.ctrlkit
        && semver::VersionReq::parse(version).is_err()
    {
        return Err(NewError::Invalid(format!(
            "--ctrlkit-version {version:?} is not a version requirement (0.1, ^0.1.2, =0.1.0)"
        )));
    }
    Ok(())
}

/// The replacements of the templates' placeholders.
fn placeholders(options: &NewOptions) -> Vec<(&'static str, String)> {
    let kind_lower = options.kind.to_ascii_lowercase();
    let dependency = match &options.ctrlkit {
        CtrlkitSource::Path(path) => format!("{{ path = {:?} }}", path.display().to_string()),
        CtrlkitSource::Version(version) => format!("{version:?}"),
    };
    vec![
        ("{{name}}", options.name.clone()),
        ("{{crate_name}}", options.name.replace('-', "_")),
        ("{{kind_lower}}", kind_lower.clone()),
        ("{{kind}}", options.kind.clone()),
        ("{{plural}}", format!("{kind_lower}s")),
        ("{{group}}", options.group.clone()),
        ("{{namespace}}", options.namespace.clone()),
        ("{{ctrlkit_dependency}}", dependency),
        ("{{image_note}}", image_note(&options.ctrlkit)),
    ]
}

/// What the made README says about building the image, which depends on where ctrlkit comes
/// from: a registry version builds from the project's directory alone, a path does not.
fn image_note(ctrlkit: &CtrlkitSource) -> String {
    match ctrlkit {
        CtrlkitSource::Version(_) => [
            "The image builds from this directory alone: `docker build` fetches every dependency,",
            "ctrlkit included, from crates.io.",
        ]
        .join("\n"),
        CtrlkitSource::Path(path) => format!(
            "ctrlkit is a path dependency on the checkout at `{}`,\n\
             which a `docker build` of this directory cannot see: `cargo test` and `cargo run` work\n\
             as they are, but for the image depend on a published ctrlkit (`ctrlkit = \"VERSION\"` in\n\
             Cargo.toml, or `ctrlkit new --ctrlkit-version`).",
            path.display()
        ),
    }
}

/// The template type's names replaced by the project's, in source or in its generated CRD.
fn rename(text: &str, options: &NewOptions) -> String {
    let kind_lower = options.kind.to_ascii_lowercase();
    let template_lower = TEMPLATE_KIND.to_ascii_lowercase();
    text.replace(&format!("{template_lower}s"), &format!("{kind_lower}s"))
        .replace(TEMPLATE_KIND, &options.kind)
        .replace(&template_lower, &kind_lower)
        .replace(TEMPLATE_GROUP, &options.group)
}

/// The CRD of the project's type, as YAML.
fn crd_yaml(options: &NewOptions) -> Result<String, NewError> {
    let json = serde_json::to_string(&resource::Widget::crd())
        .map_err(|error| NewError::Crd(error.to_string()))?;
    let renamed: serde_json::Value = serde_json::from_str(&rename(&json, options))
        .map_err(|error| NewError::Crd(error.to_string()))?;
    serde_saphyr::to_string(&renamed).map_err(|error| NewError::Crd(error.to_string()))
}

fn write(path: &Path, contents: &str) -> Result<(), NewError> {
    let failed = |source| NewError::Write {
        path: path.to_owned(),
        source,
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(failed)?;
    }
    std::fs::write(path, contents).map_err(failed)
}

/// Makes the project; returns its directory.
pub fn create(options: &NewOptions) -> Result<PathBuf, NewError> {
    check(options)?;
    if options.dir.exists() {
        return Err(NewError::Exists(options.dir.clone()));
    }
    let replacements = placeholders(options);
    for (relative, template) in FILES {
        let mut text = template.to_owned();
        if relative == "src/resource.rs" {
            text = rename(&text, options);
        }
        for (placeholder, value) in &replacements {
            text = text.replace(placeholder, value);
        }
        write(&options.dir.join(relative), &text)?;
    }
    write(&options.dir.join("manifests/crd.yaml"), &crd_yaml(options)?)?;
    write(&options.dir.join(".gitignore"), "/target\n")?;
    // Resolve the dependencies as this checkout did: the project builds offline from the
    // crates its ctrlkit was built with.
    if let CtrlkitSource::Path(path) = &options.ctrlkit
        && let Some(lock) = path
            .parent()
            .and_then(Path::parent)
            .map(|root| root.join("Cargo.lock"))
        && let Ok(contents) = std::fs::read_to_string(lock)
    {
        write(&options.dir.join("Cargo.lock"), &contents)?;
    }
    Ok(options.dir.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(kind: &str, group: &str) -> NewOptions {
        NewOptions {
            name: "gizmo-operator".into(),
            dir: PathBuf::from("/nonexistent/gizmo-operator"),
            kind: kind.into(),
            group: group.into(),
            namespace: "gizmos".into(),
            ctrlkit: CtrlkitSource::Version("0.1".into()),
        }
    }

    #[test]
    fn the_crd_is_the_template_types_renamed() {
        let yaml = crd_yaml(&options("Gizmo", "gadgets.example.org")).unwrap();
        let crd: serde_json::Value = serde_saphyr::from_str(&yaml).unwrap();
        assert_eq!(crd["metadata"]["name"], "gizmos.gadgets.example.org");
        assert_eq!(crd["spec"]["group"], "gadgets.example.org");
        assert_eq!(crd["spec"]["names"]["kind"], "Gizmo");
        assert_eq!(crd["spec"]["names"]["plural"], "gizmos");
        assert_eq!(crd["spec"]["names"]["singular"], "gizmo");
        assert!(!yaml.contains("idget"), "{yaml}");
    }

    #[test]
    fn names_kinds_and_groups_are_checked() {
        assert!(check(&options("Gizmo", "example.org")).is_ok());
        assert!(check(&options("gizmo", "example.org")).is_err());
        assert!(check(&options("Gizmo", "example")).is_err());
        let mut bad = options("Gizmo", "example.org");
        bad.name = "Gizmo_Operator".into();
        assert!(check(&bad).is_err());
        let mut bad = options("Gizmo", "example.org");
        bad.namespace = "Bad_NS".into();
        assert!(check(&bad).is_err());
        for version in ["0.1", "^0.1.2", "=1.0.0", "0.2.0-beta.1"] {
            let mut good = options("Gizmo", "example.org");
            good.ctrlkit = CtrlkitSource::Version(version.into());
            assert!(check(&good).is_ok(), "{version}");
        }
        for version in [
            "notaversion",
            "",
            "1..2",
            "1.2.3.4",
            "latest",
            "^^0.1",
            "0.1.0-\"x",
        ] {
            let mut bad = options("Gizmo", "example.org");
            bad.ctrlkit = CtrlkitSource::Version(version.into());
            assert!(check(&bad).is_err(), "{version}");
        }
    }
}
