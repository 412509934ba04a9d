//! kube's `Semver` functions (since 1.33): `semver`, `isSemver` (each also with kube's
//! normalization), `major`, `minor`, `patch`, `isLessThan`, `isGreaterThan`, `compareTo`.
//!
//! Versions are read as Semantic Versioning 2.0.0 strictly (the `semver` crate); ordering and
//! equality are by precedence, so build metadata does not count, as in kube.

use std::cmp::Ordering;
use std::sync::Arc;

use cel::common::types::{BOOL_TYPE, STRING_TYPE, Type};
use cel::objects::Opaque;
use cel::{DeclarationError, Env, Value};

use super::{Outcome, error, no_such_overload, opaque_arg, overload, string_arg};

/// The CEL type name of a version.
const TYPE_NAME: &str = "kubernetes.Semver";

/// A semantic version, equal to another of the same precedence.
#[derive(Debug, Clone)]
struct Semver(::semver::Version);

impl PartialEq for Semver {
    fn eq(&self, other: &Self) -> bool {
        self.0.cmp_precedence(&other.0) == Ordering::Equal
    }
}

impl Eq for Semver {}

impl Opaque for Semver {
    fn runtime_type_name(&self) -> &str {
        TYPE_NAME
    }
}

/// Reads `text` as a version; with `normalize`, as kube's normalization has it first: no
/// leading `v`, leading zeros dropped, a missing minor or patch number taken as 0.
fn parse(text: &str, normalize: bool) -> Result<::semver::Version, String> {
    if !normalize {
        return strict(text);
    }
    let text = text.strip_prefix('v').unwrap_or(text);
    let mut parts: Vec<String> = text
        .splitn(3, '.')
        .map(|part| {
            if part.len() <= 1 {
                return part.to_owned();
            }
            let trimmed = part.trim_start_matches('0');
            if trimmed.starts_with(|c: char| c.is_ascii_digit()) {
                trimmed.to_owned()
            } else {
                format!("0{trimmed}")
            }
        })
        .collect();
    if parts.len() < 3 {
        if parts.last().is_some_and(|last| last.contains(['+', '-'])) {
            return Err("short version cannot contain PreRelease/Build meta data".to_owned());
        }
        parts.resize(3, "0".to_owned());
    }
    strict(&parts.join("."))
}

/// Reads `text` as SemVer 2.0.0, as Go's `blang/semver` does: a numeric pre-release part must
/// also fit in 64 bits.
fn strict(text: &str) -> Result<::semver::Version, String> {
    let version = ::semver::Version::parse(text).map_err(|problem| problem.to_string())?;
    let overflows = version.pre.split('.').any(|part| {
        part.bytes().all(|byte| byte.is_ascii_digit())
            && !part.is_empty()
            && part.parse::<u64>().is_err()
    });
    if overflows {
        return Err(format!("pre-release number of {text:?} is too large"));
    }
    Ok(version)
}

/// The optional second argument: whether to normalize.
fn normalize(name: &str, args: &[Value]) -> Result<bool, cel::ExecutionError> {
    match args.get(1) {
        None => Ok(false),
        Some(Value::Bool(normalize)) => Ok(*normalize),
        Some(_) => Err(no_such_overload(name)),
    }
}

/// A version's number as CEL's `int`; past `int`'s range it wraps as kube's conversion does.
fn number(value: u64) -> Value {
    Value::Int(value as i64)
}

/// The receiver and the operand of a comparison.
fn ordering(name: &str, args: &[Value]) -> Result<Ordering, cel::ExecutionError> {
    let this = opaque_arg::<Semver>(name, args, 0)?;
    let other = opaque_arg::<Semver>(name, args, 1)?;
    Ok(this.0.cmp_precedence(&other.0))
}

pub fn register(env: &mut Env) -> Result<(), DeclarationError> {
    overload!(to_semver, "semver", |name, args| -> Outcome {
        let text = string_arg(name, args, 0)?;
        parse(text, normalize(name, args)?)
            .map(|version| Value::Opaque(Arc::new(Semver(version))))
            .map_err(|problem| error(name, problem))
    });
    overload!(is_semver, "isSemver", |name, args| {
        let text = string_arg(name, args, 0)?;
        Ok(Value::Bool(parse(text, normalize(name, args)?).is_ok()))
    });
    overload!(major, "major", |name, args| Ok(number(
        opaque_arg::<Semver>(name, args, 0)?.0.major
    )));
    overload!(minor, "minor", |name, args| Ok(number(
        opaque_arg::<Semver>(name, args, 0)?.0.minor
    )));
    overload!(patch, "patch", |name, args| Ok(number(
        opaque_arg::<Semver>(name, args, 0)?.0.patch
    )));
    overload!(is_less_than, "isLessThan", |name, args| Ok(Value::Bool(
        ordering(name, args)? == Ordering::Less
    )));
    overload!(is_greater_than, "isGreaterThan", |name, args| Ok(
        Value::Bool(ordering(name, args)? == Ordering::Greater)
    ));
    overload!(compare_to, "compareTo", |name, args| Ok(Value::Int(
        ordering(name, args)? as i64
    )));
    let semver_type = || Type::new_opaque_type(TYPE_NAME);
    // The global functions, each also with kube's normalization flag.
    for (function, id, normalizing_id, body) in [
        (
            "semver",
            "string_to_semver",
            "string_bool_to_semver",
            to_semver as cel::common::functions::Function,
        ),
        (
            "isSemver",
            "is_semver_string",
            "is_semver_string_bool",
            is_semver,
        ),
    ] {
        env.add_overload(function, id, vec![STRING_TYPE], body)?;
        env.add_overload(function, normalizing_id, vec![STRING_TYPE, BOOL_TYPE], body)?;
    }
    // The member functions: the numbers take no argument, the comparisons another version.
    let operand = || vec![semver_type()];
    for (function, id, args, body) in [
        (
            "major",
            "semver_major",
            vec![],
            major as cel::common::functions::Function,
        ),
        ("minor", "semver_minor", vec![], minor),
        ("patch", "semver_patch", vec![], patch),
        ("isLessThan", "semver_is_less_than", operand(), is_less_than),
        (
            "isGreaterThan",
            "semver_is_greater_than",
            operand(),
            is_greater_than,
        ),
        ("compareTo", "semver_compare_to", operand(), compare_to),
    ] {
        env.add_member_overload(function, id, semver_type(), args, body)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::tests::{assert_true, eval};

    #[test]
    fn versions_parse_and_compare_as_kube_has_them() {
        assert_true(&[
            "isSemver('1.0.0')",
            "isSemver('0.1.0-alpha.1+build.5')",
            "!isSemver('hello')",
            "!isSemver('v1.0')",
            "!isSemver('01.1.1')",
            "isSemver('v1.0', true)",
            "isSemver('01.01.01', true)",
            "!isSemver('1.0-rc1', true)",
            "isSemver('1.0.0-18446744073709551615')",
            "!isSemver('1.0.0-18446744073709551616')",
            "semver('v1.0', true) == semver('1.0.0')",
            "semver('01.01.01', true) == semver('1.1.1')",
            "semver('1.2.3').major() == 1",
            "semver('1.2.3').minor() == 2",
            "semver('1.2.3').patch() == 3",
            "semver('1.2.3').compareTo(semver('1.2.3')) == 0",
            "semver('1.2.3').compareTo(semver('2.0.0')) == -1",
            "semver('1.2.3').compareTo(semver('0.1.2')) == 1",
            "semver('1.0.0-alpha').isLessThan(semver('1.0.0'))",
            "semver('1.10.0').isGreaterThan(semver('1.9.0'))",
            // Build metadata has no precedence.
            "semver('1.0.0+a') == semver('1.0.0+b')",
            "!semver('1.0.0+a').isLessThan(semver('1.0.0+b'))",
            // Quantities keep their own comparisons.
            "quantity('1').isLessThan(quantity('2'))",
        ]);
        assert!(eval("semver('Three')").is_err());
        assert!(eval("semver('1.0', false)").is_err());
    }
}
